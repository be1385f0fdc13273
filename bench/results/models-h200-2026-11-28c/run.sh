# c121 (at HEAD, this session's end): `irforge generate` on TinyLlama-1.1B bf16 (tokens, logits, speed against the
# decode bandwidth limit), then the GPU tests
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
export IRFORGE_CACHE_DIR=$PWD/.dev/mb/cache
mkdir -p /tmp/b && cp -r .dev/mb/unroll2/* /tmp/b/ 2>/dev/null
timeout 200 python bench/models_gpu.py run --dir /tmp/b --out $R/models --only tinyllama-bf16 --no-torch-compile > $R/models.log 2>&1; echo "rc=$?"
grep -E "irforge:|HF eager|limit|FAIL" $R/models.log | cut -c1-200 | head -6
python -c "
import json; r=json.load(open('$R/models/models-h200.json'))
print([(g['case'], round(g['decode_fraction_of_bandwidth_limit'],4)) for g in r['generate']], [(x['case'], round(x['max_rel_error'],4)) for x in r['logits']])"
echo "generate $((SECONDS - t0)) s"
unset IRFORGE_CACHE_DIR
timeout 330 python -m pytest -p no:cacheprovider -q tests/test_gpu.py tests/test_runtime.py tests/test_state.py tests/test_cli_gpu_levels.py tests/test_kernel_clusters.py tests/test_attention_mma.py -m gpu > $R/test_gpu.log 2>&1; echo "rc=$?"
tail -2 $R/test_gpu.log
echo "all $((SECONDS - t0)) s"
