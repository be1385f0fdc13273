# c69: F3 at the new default (wgmma, chunks of 64 keys) against 128-row blocks of two warpgroups (chunks of 64 and
# 128) and rings of 3, twice; F1, F2 and the Qwen2.5 prefill layer (D4) at the defaults
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench --suite llm --systems eager,irforge"
for run in 1 2; do
$B --cases F3 -o $R/f3_$run \
  --variant "bm128=$(V tile-blockify 'bm=128 threads=256' tile-chunk-reduce bk=128)" \
  --variant "bm128bk64=$(V tile-blockify 'bm=128 threads=256' tile-chunk-reduce bk=64)" \
  --variant "ring3=$(V tile-multi-buffer stages=3)" > $R/f3_$run.log 2>&1
grep -E "^\| (F|D)" $R/f3_$run/llm.md | cut -c1-300; echo "f3 run $run at $((SECONDS - t0)) s"
done
grep -iE "error|refus|declin|Traceback" $R/f3_1.log | head -5
$B --cases F1,F2,D4 -o $R/f12d4 > $R/f12d4.log 2>&1
grep -E "^\| (F|D)" $R/f12d4/llm.md | cut -c1-300; echo "f12d4 at $((SECONDS - t0)) s"
