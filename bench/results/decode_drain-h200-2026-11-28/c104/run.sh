# c104 (at 457955a): TinyLlama-1.1B bf16 decode step, three defaults interleaved: adca756's (base: no prefetch),
# c5bf663's (idle3: prefetch behind idle launches), 457955a's (head: and the 1 us drain window behind streaming
# launches); `models_gpu.py run` on head (decode steps timed back to back); the llm suite at 457955a; the GPU tests
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
export IRFORGE_CACHE_DIR=$PWD/.dev/mb/cache
M="base=.dev/mb/base/tinyllama-bf16.json idle3=.dev/mb/idle3/tinyllama-bf16.json head=.dev/mb/head/tinyllama-bf16.json"
for i in 1 2; do
  timeout 150 python bench/decode_sweep.py step $M --profile --rounds 7 --json $R/step$i.json > $R/step$i.log 2>&1
  grep -E "decode step" $R/step$i.log
  echo "step $i $((SECONDS - t0)) s"
done
mkdir -p /tmp/b && cp -r .dev/mb/head/* /tmp/b/
timeout 200 python bench/models_gpu.py run --dir /tmp/b --out $R/models --only tinyllama-bf16 > $R/models.log 2>&1
grep -E "irforge:|HF eager|compile:|limit|within|logits|FAIL|DIFFERENT|identical" $R/models.log | cut -c1-200 | head -20
echo "models $((SECONDS - t0)) s"
unset IRFORGE_CACHE_DIR
B="python -m irforge.tools.cli bench"
timeout 120 $B --suite llm --compile-only --cache /tmp/cache --jobs 14 > $R/compile.log 2>&1; tail -1 $R/compile.log
timeout 170 $B --suite llm --cache /tmp/cache --systems eager,irforge -o $R/llm > $R/llm.log 2>&1
grep -E "geomean|README row|^\| (F4|L12|L5 |D)" $R/llm/llm.md $R/llm.log | cut -c1-220
echo "llm $((SECONDS - t0)) s"
timeout $((570 - (SECONDS - t0))) python -m pytest -p no:cacheprovider -q tests/test_gpu.py > $R/test_gpu.log 2>&1; tail -2 $R/test_gpu.log
echo "all $((SECONDS - t0)) s"
