# c51: the whole test suite on the GPU machine (GPU tests included; lit is not installed there), then F4 tuned
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
timeout 330 python -m pytest -q -p no:cacheprovider -o addopts="--dist loadgroup" -n 16 tests \
  --deselect tests/test_lit.py::test_lit_suite -rfE --durations=25 > $R/tests.log 2>&1
echo "tests rc=$? at $((SECONDS - t0)) s"; grep -E "passed|failed|FAILED|ERROR" $R/tests.log | tail -25
timeout 200 python -m irforge.tools.cli tune --suite llm --cases F4 --budget 60 --time 60 --jobs 16 --db $R/t.sqlite > $R/tune.log 2>&1
echo "tune rc=$? at $((SECONDS - t0)) s"; tail -30 $R/tune.log
timeout 50 python -m irforge.tools.cli bench --suite llm --cases F4 --systems eager,irforge --tuned --db $R/t.sqlite -o $R/bench > $R/bench.log 2>&1
grep -E "^\| F4" $R/bench/llm.md; echo "all $((SECONDS - t0)) s"
