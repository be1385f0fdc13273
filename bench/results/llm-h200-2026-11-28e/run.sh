# c122 (at HEAD, this session's end): the whole llm suite, eager and irforge
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench"
timeout 150 $B --suite llm --compile-only --cache /tmp/cache --jobs 14 > $R/compile.log 2>&1; tail -1 $R/compile.log
timeout $((570 - (SECONDS - t0))) $B --suite llm --cache /tmp/cache --systems eager,irforge -o $R/llm > $R/llm.log 2>&1; echo "rc=$?"
grep -E "geomean|README row|^\| (F4|F6|L12|L5 |L1 |D)" $R/llm/llm.md $R/llm.log | cut -c1-220
echo "all $((SECONDS - t0)) s"
