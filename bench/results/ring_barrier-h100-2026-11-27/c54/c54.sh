# c54: after 5ab0fc3 (a barrier before a re-entered ring's prologue): the f32 parts against float64, the GPU tests
# of the decoder layers and corpus, and both suites (untuned) for regressions
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
timeout 120 python .dev/c53.py > $R/c53.log 2>&1; grep -v Warning $R/c53.log | grep -v "return forward" | tail -6
timeout 150 python -m pytest -q -p no:cacheprovider -o addopts="" -n 8 tests/test_reach_cuda.py tests/test_gpu.py tests/test_gpu_corpus.py -rfE > $R/gputests.log 2>&1
echo "gpu tests rc=$? at $((SECONDS - t0)) s"; grep -E "passed|failed|^FAILED" $R/gputests.log | tail -6
for s in llm seed84; do timeout 100 python -m irforge.tools.cli bench --suite $s --compile-only --cache /tmp/cache --jobs 16 > $R/compile_$s.log 2>&1; tail -1 $R/compile_$s.log; done
echo "compiled at $((SECONDS - t0)) s"
timeout 110 python -m irforge.tools.cli bench --suite llm --cache /tmp/cache --systems eager,irforge -o $R/llm > $R/llm.log 2>&1
grep -E "geomean" $R/llm/llm.md; grep -E "^\| (F[1-6]|L4|L12|D[1-4]) " $R/llm/llm.md | cut -c1-160
echo "llm at $((SECONDS - t0)) s"
timeout 120 python -m irforge.tools.cli bench --suite seed84 --cache /tmp/cache --systems eager,irforge -o $R/seed84 > $R/seed84.log 2>&1
grep -E "geomean|^- " $R/seed84/seed84.md | head -4; echo "all $((SECONDS - t0)) s"
