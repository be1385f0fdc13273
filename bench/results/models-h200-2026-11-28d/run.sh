# c125 (at HEAD, this session's end): every case of bench/models_gpu.py (the tiny configs, TinyLlama-1.1B and
# SmolLM2-135M in f32 against HF's greedy tokens; TinyLlama bf16 through `irforge generate`; bf16 logits of
# TinyLlama, SmolLM2 and Qwen2.5-7B's 512-token prefill; TinyLlama's 512-token prefill against HF eager)
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
export IRFORGE_CACHE_DIR=$PWD/.dev/mb/cache
mkdir -p /tmp/b && cp -r .dev/mb/final/* /tmp/b/
timeout 520 python bench/models_gpu.py run --dir /tmp/b --out $R/models --no-torch-compile > $R/models.log 2>&1; echo "rc=$?"
grep -E "irforge:|HF eager|limit|FAIL|identical|DIFFERENT|wrote" $R/models.log | cut -c1-200 | head -30
echo "all $((SECONDS - t0)) s"
