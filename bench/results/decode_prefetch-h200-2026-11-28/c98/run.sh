# c98: TinyLlama-1.1B bf16 decode step with the next kernel's weights prefetched into L2 behind launches that
# leave the memory idle (kernel-dependent-launch{prefetch-l2-share=0.5 prefetch-when=idle}, window 2 us or 3 us)
# against no prefetch (the default) and the old every-kernel prefetch (share 0.5); builds compiled on the CPU
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
export IRFORGE_CACHE_DIR=$PWD/.dev/mb/cache
M="base=.dev/mb/base/tinyllama-bf16.json idle=.dev/mb/idle/tinyllama-bf16.json idle3=.dev/mb/idle3/tinyllama-bf16.json all=.dev/mb/all/tinyllama-bf16.json"
for i in 1 2; do
  timeout 200 python bench/decode_sweep.py step $M --profile --rounds 7 --json $R/step$i.json > $R/step$i.log 2>&1
  grep -E "decode step" $R/step$i.log
done
grep -vE "Warning|warn_once" $R/step1.log | cut -c1-120 | tail -80
echo "all $((SECONDS - t0)) s"
