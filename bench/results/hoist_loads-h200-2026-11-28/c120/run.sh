# c120: is the reverted unrolling (098f158's loops unrolled for their loads, without weights ahead of the wait)
# wrong on the GPU too? `unroll` (built at that state) against 60ef103's build (`hoist`): the decode step timed,
# then the logits check and `irforge generate` of the unroll build
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
export IRFORGE_CACHE_DIR=$PWD/.dev/mb/cache
timeout 150 python bench/decode_sweep.py step hoist=.dev/mb/hoist/tinyllama-bf16.json unroll=.dev/mb/unroll/tinyllama-bf16.json --profile --rounds 7 --json $R/step1.json > $R/step1.log 2>&1
grep -hE "decode step|kernels " $R/step1.log | cut -c1-150
mkdir -p /tmp/b && cp -r .dev/mb/unroll/* /tmp/b/ 2>/dev/null
timeout 300 python bench/models_gpu.py run --dir /tmp/b --out $R/models --only tinyllama-bf16 --no-torch-compile > $R/models.log 2>&1; echo "rc=$?"
grep -E "irforge:|HF eager|limit|logits|FAIL|max_rel" $R/models.log | cut -c1-200 | head -8
python -c "
import json; r=json.load(open('$R/models/models-h200.json'))
print([(x['case'], round(x['max_rel_error'],4)) for x in r['logits']])"
echo "all $((SECONDS - t0)) s"
