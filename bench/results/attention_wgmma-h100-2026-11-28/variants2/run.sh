# c63: prefill attention on wgmma (F1, F2) at the default against block, ring and chunk variants, twice
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench --suite llm --systems eager,irforge"
for run in 1 2; do
$B --cases F1,F2,D3 -o $R/v_$run \
  --variant "bm128=$(V tile-blockify bm=128)" \
  --variant "ring4=$(V tile-multi-buffer stages=4)" \
  --variant "ring2=$(V tile-multi-buffer stages=2)" \
  --variant "bk256=$(V tile-chunk-reduce bk=256)" > $R/v_$run.log 2>&1
grep -E "^\| (F|D)" $R/v_$run/llm.md | cut -c1-260; echo "run $run at $((SECONDS - t0)) s"
done
grep -iE "error|refus|declin" $R/v_1.log | head -5
