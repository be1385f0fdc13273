# c65: prefill attention on wgmma with two warpgroups a block (128 query rows, 256 threads) against one, twice
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench --suite llm --systems eager,irforge"
for run in 1 2; do
$B --cases F1,F2 -o $R/w_$run --variant "wg2=$(V tile-blockify 'bm=128 threads=256')" \
  --variant "wg2_ring2=$(V tile-blockify 'bm=128 threads=256' tile-multi-buffer stages=2)" > $R/w_$run.log 2>&1
grep -E "^\| F" $R/w_$run/llm.md | cut -c1-260; echo "run $run at $((SECONDS - t0)) s"
done
grep -iE "error|refus" $R/w_1.log | head -5
