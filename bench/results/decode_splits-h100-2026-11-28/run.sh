# c66: L12 (decode projection, 32 x 18944 x 3584) with more, smaller K shares: chunks of 32 in 16 splits, chunks of
# 128 in 4 or 8, and 37-trip shares of 32 in 8 splits with rings of 4; twice
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench --suite llm --systems eager,irforge"
for run in 1 2; do
$B --cases L12,L4 -o $R/l_$run \
  --variant "bk32s16=$(V tile-chunk-reduce bk=32 tile-split-reduce splits=16)" \
  --variant "bk128s8=$(V tile-chunk-reduce bk=128 tile-split-reduce splits=8)" \
  --variant "bk32s8=$(V tile-chunk-reduce bk=32 tile-split-reduce splits=8)" \
  --variant "bk32s16r4=$(V tile-chunk-reduce bk=32 tile-split-reduce splits=16 tile-multi-buffer stages=4)" > $R/l_$run.log 2>&1
grep -E "^\| L" $R/l_$run/llm.md | cut -c1-260; echo "run $run at $((SECONDS - t0)) s"
done
grep -iE "error|refus" $R/l_1.log | head -5
