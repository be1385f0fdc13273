# c94: TinyLlama bf16 decode on the H200 (generate against HF eager) and the per-kernel profile of its decode step
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
timeout 450 python bench/models_gpu.py run --dir build/models --out $R/models --only tinyllama-bf16 --profile tinyllama-bf16 --no-torch-compile > $R/models.log 2>&1
grep -E "tokens/s|decode step|prefill step|bandwidth" $R/models.log | head -10 | cut -c1-300
grep -A45 "decode step" $R/models.log | head -50 | cut -c1-200
echo "all $((SECONDS - t0)) s"
