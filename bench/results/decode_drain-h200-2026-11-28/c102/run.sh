# c102: TinyLlama-1.1B bf16 decode step at c5bf663 (the default now prefetches behind idle launches: idle3) against
# the previous default (base, adca756's pipeline) and two variants that also prefetch a floor window behind
# streaming launches (tail1: 1 us at the DRAM rate, tail2: 2 us); then `models_gpu.py run` on idle3
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
export IRFORGE_CACHE_DIR=$PWD/.dev/mb/cache
M="base=.dev/mb/base/tinyllama-bf16.json idle3=.dev/mb/idle3/tinyllama-bf16.json tail1=.dev/mb/tail1/tinyllama-bf16.json tail2=.dev/mb/tail2/tinyllama-bf16.json"
for i in 1 2; do
  timeout 200 python bench/decode_sweep.py step $M --profile --rounds 7 --json $R/step$i.json > $R/step$i.log 2>&1
  grep -E "decode step" $R/step$i.log
  echo "step $i $((SECONDS - t0)) s"
done
grep -vE "Warning|warn_once" $R/step1.log | grep -E "decode step|k_linear|mul_mean|add_linear|attention" | cut -c1-120
mkdir -p /tmp/b && cp -r .dev/mb/idle3/* /tmp/b/
timeout 300 python bench/models_gpu.py run --dir /tmp/b --out $R/models --only tinyllama-bf16 > $R/models.log 2>&1
grep -E "irforge:|HF eager|limit|tokens|within|logits|FAIL|DIFFERENT|identical" $R/models.log | cut -c1-200 | head -20
echo "all $((SECONDS - t0)) s"
