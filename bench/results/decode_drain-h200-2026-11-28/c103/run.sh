# c103 (at dd3d822): TinyLlama-1.1B bf16 decode step: c5bf663's default (idle3: prefetch behind idle launches),
# plus the drain window behind streaming launches (drain), plus the q/k projections' vector left unstaged (both =
# dd3d822); then `models_gpu.py run` on both (decode steps now timed back to back), and the llm suite at dd3d822
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
export IRFORGE_CACHE_DIR=$PWD/.dev/mb/cache
M="idle3=.dev/mb/idle3/tinyllama-bf16.json drain=.dev/mb/drain/tinyllama-bf16.json both=.dev/mb/both/tinyllama-bf16.json"
for i in 1 2; do
  timeout 150 python bench/decode_sweep.py step $M --profile --rounds 7 --json $R/step$i.json > $R/step$i.log 2>&1
  grep -E "decode step" $R/step$i.log
  echo "step $i $((SECONDS - t0)) s"
done
grep -vE "Warning|warn_once" $R/step1.log | grep -E "decode step|k_linear |k_linear_1|add_linear_1" | cut -c1-120
mkdir -p /tmp/b && cp -r .dev/mb/both/* /tmp/b/
timeout 200 python bench/models_gpu.py run --dir /tmp/b --out $R/models --only tinyllama-bf16 > $R/models.log 2>&1
grep -E "irforge:|HF eager|compile:|limit|within|logits|FAIL|DIFFERENT|identical" $R/models.log | cut -c1-200 | head -20
echo "models $((SECONDS - t0)) s"
unset IRFORGE_CACHE_DIR
B="python -m irforge.tools.cli bench"
timeout 150 $B --suite llm --compile-only --cache /tmp/cache --jobs 14 > $R/compile.log 2>&1; tail -1 $R/compile.log
echo "compiled $((SECONDS - t0)) s"
timeout 180 $B --suite llm --cache /tmp/cache --systems eager,irforge -o $R/llm > $R/llm.log 2>&1
grep -E "geomean|^\| (F|L12|L5|D)" $R/llm/llm.md | cut -c1-200
echo "all $((SECONDS - t0)) s"
