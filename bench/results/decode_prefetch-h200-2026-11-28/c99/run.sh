# c99: TinyLlama-1.1B bf16 decode step: decode attention (4 blocks, 64 cache slots) with its keys sliced among
# 2 or 4 warps (chunks of 16; winners written into a tuning database), with and without the idle-window L2
# prefetch (3 us), against the default; then the best candidate's logits and tokens checked against HF
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
export IRFORGE_CACHE_DIR=$PWD/.dev/mb/cache
M="base=.dev/mb/base/tinyllama-bf16.json w2=.dev/mb/w2/tinyllama-bf16.json w4=.dev/mb/w4/tinyllama-bf16.json idle3=.dev/mb/idle3/tinyllama-bf16.json w4idle3=.dev/mb/w4idle3/tinyllama-bf16.json"
for i in 1 2; do
  timeout 200 python bench/decode_sweep.py step $M --profile --rounds 7 --json $R/step$i.json > $R/step$i.log 2>&1
  grep -E "decode step" $R/step$i.log
done
grep -vE "Warning|warn_once" $R/step1.log | grep -E "decode step|attention|k_linear_1 |mul_mean" | cut -c1-120
echo "steps $((SECONDS - t0)) s"
mkdir -p /tmp/b && cp .dev/mb/w4idle3/tinyllama-bf16.json /tmp/b/
timeout 240 python bench/models_gpu.py run --dir /tmp/b --out $R/models --only tinyllama-bf16 --no-torch-compile > $R/models.log 2>&1
grep -E "irforge:|HF eager|limit|tokens|within|logits|FAIL|DIFFERENT|identical" $R/models.log | cut -c1-200 | head -20
echo "all $((SECONDS - t0)) s"
