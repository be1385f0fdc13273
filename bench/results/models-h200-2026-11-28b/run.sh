# c115 (at HEAD): the GPU tests after this session's codegen changes (top-half mma accumulating in place, Q read once,
# the cluster budgets, the file splits), then `irforge generate` on TinyLlama-1.1B bf16 (tokens, logits, speed)
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
timeout 330 python -m pytest -p no:cacheprovider -q -rs tests/test_gpu.py tests/test_runtime.py tests/test_state.py tests/test_cli_gpu_levels.py tests/test_kernel_clusters.py tests/test_attention_mma.py -m gpu > $R/test_gpu.log 2>&1; echo "rc=$?"
tail -4 $R/test_gpu.log
echo "tests $((SECONDS - t0)) s"
mkdir -p /tmp/b && cp -r .dev/mb/ghost/* /tmp/b/ 2>/dev/null
timeout $((560 - (SECONDS - t0))) python bench/models_gpu.py run --dir /tmp/b --out $R/models --only tinyllama-bf16 --no-torch-compile > $R/models.log 2>&1; echo "rc=$?"
grep -E "irforge:|HF eager|compile:|limit|within|logits|FAIL|DIFFERENT|identical" $R/models.log | cut -c1-200 | head -20
echo "all $((SECONDS - t0)) s"
