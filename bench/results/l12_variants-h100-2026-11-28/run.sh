# c73: L12 (decode down projection, 81% of the copy bandwidth at 224 blocks: 1.7 a multiprocessor) against tile
# widths and split counts that deal more, smaller blocks; twice
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
for run in 1 2; do
timeout 200 python -m irforge.tools.cli bench --suite llm --cases L12,L12.f16 --systems eager,irforge -o $R/l12_$run \
  --variant "bn64=$(V tile-blockify bn=64)" --variant "bn64bk32s16=$(V tile-blockify bn=64 tile-chunk-reduce bk=32 tile-split-reduce splits=16)" \
  --variant "bn32s8=$(V tile-blockify bn=32 tile-split-reduce splits=8)" --variant "bn32=$(V tile-blockify bn=32)" \
  --variant "bk32s16=$(V tile-chunk-reduce bk=32 tile-split-reduce splits=16)" --variant "bn32s8r4=$(V tile-blockify bn=32 tile-split-reduce splits=8 tile-multi-buffer stages=4)" > $R/l12_$run.log 2>&1
grep -E "^\| (case|L12)" $R/l12_$run/llm.md | cut -c1-600; grep -iE "refus|error" $R/l12_$run.log | head -5; echo "run $run at $((SECONDS - t0)) s"
done
