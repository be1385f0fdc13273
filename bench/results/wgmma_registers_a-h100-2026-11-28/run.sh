# c60: wgmma with A from registers and B MN-major (kernel level) on the GPU: test_gpu.py's examples (including the
# new ones) against numpy, then gpu_smoke's larger ones, and compute-sanitizer on one of them.
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
timeout 300 python -m pytest -q -p no:cacheprovider -o addopts="" tests/test_gpu.py -rfEs > $R/test_gpu.log 2>&1
echo "test_gpu rc=$? at $((SECONDS - t0)) s"; grep -E "passed|failed|^FAILED|^ERROR" $R/test_gpu.log | tail -8
cat > /tmp/one.py <<'PY'
import numpy as np, sys
from irforge.dialects.kernel import examples as E
from irforge.runtime.selfcheck import check_example
for ex in [E.wgmma_registers_a(64, 4096, bk=64, warpgroups=2), E.wgmma_registers_a(32, 1024, bk=32, dtype="f16"), E.wgmma_linear(192, 4096, bk=64, warpgroups=2)]:
    c = check_example(ex, np.random.default_rng(7), time_it=True)
    print(ex.name, "ok" if c.ok else "WRONG", f"{c.error:.2e}", c.detail, f"{c.ms*1e3:.1f} us", c.extra.get("resources"))
PY
timeout 120 python /tmp/one.py 2>&1 | tee $R/examples.txt
timeout 200 compute-sanitizer --tool memcheck python /tmp/one.py > $R/sanitizer.txt 2>&1; echo "sanitizer rc=$?"; tail -5 $R/sanitizer.txt
