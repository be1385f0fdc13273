# c113: the prototype loop-fuse-prologues (RMSNorm's statistics and map recomputed in the decode step's projections:
# 6 kernels a layer instead of 8): TinyLlama's decode step, ghost (4fcd836's build) against prolog (this tree's),
# interleaved in one process, twice; D1, D2 with the pass left out as a variant
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
export IRFORGE_CACHE_DIR=$PWD/.dev/mb/cache
for i in 1 2; do
  timeout 150 python bench/decode_sweep.py step ghost=.dev/mb/ghost/tinyllama-bf16.json prolog=.dev/mb/prolog/tinyllama-bf16.json --profile --rounds 7 --json $R/step$i.json > $R/step$i.log 2>&1
  grep -hE "decode step|^  (layer|epilogue)|kernels " $R/step$i.log | cut -c1-160
  echo "step $i $((SECONDS - t0)) s"
done
unset IRFORGE_CACHE_DIR
T=$(sed 's/#.*//' pipelines/tensor-to-loop.pipeline | tr -d ' \n' | sed 's/loop-fuse-prologues,//')
NOP="torch-to-tensor,$T,loop-to-tile,tile-to-kernel,kernel-to-cuda"
timeout 200 python -m irforge.tools.cli bench --suite llm --cases D1,D2 --systems eager,irforge --variant "noprolog=$NOP" -o $R/d > $R/d.log 2>&1
grep -hE "^\| (D)[0-9]|^\| case" $R/d/llm.md | cut -c1-250
echo "all $((SECONDS - t0)) s"
