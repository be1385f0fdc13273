# c58: resource counts read from the CUBIN (ec93529) on the GPU machine, where NVRTC's log sometimes lacks ptxas'
# report: the runtime tests, the CUBIN's counts against the driver's, and the tests that failed on that before
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
timeout 300 python -m pytest -q -p no:cacheprovider -o addopts="" -n 8 tests/test_runtime.py tests/test_gpu.py tests/test_reach_cuda.py tests/test_tensor_cores.py tests/test_gpu_corpus.py -rfEs > $R/gputests.log 2>&1
echo "gpu tests rc=$? at $((SECONDS - t0)) s"; grep -E "passed|failed|^FAILED|^SKIPPED|^ERROR" $R/gputests.log | tail -12
python - > $R/logs.txt 2>&1 <<'PY'
import sys; sys.path.insert(0, "tests")
from test_runtime import GOOD
from irforge.runtime import nvrtc
for i in range(3):
    c = nvrtc.compile_cuda(GOOD, "k", arch="sm_90a", options=["--ptxas-options=-v"], use_cache=False)
    print(i, "log has the report:", "Used" in c.log, "| CUBIN:", nvrtc.cubin.resource_usage(c.image))
print("library", nvrtc.loaded_library(), nvrtc.nvrtc_version())
PY
cat $R/logs.txt
