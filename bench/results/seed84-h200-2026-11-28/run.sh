# c123 (at HEAD, this session's end): the whole seed84 suite, eager and irforge
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS; rm -rf $R/models $R/llm $R/*.log
B="python -m irforge.tools.cli bench"
timeout 150 $B --suite seed84 --compile-only --cache /tmp/cache --jobs 14 > $R/compile.log 2>&1; tail -1 $R/compile.log
timeout $((570 - (SECONDS - t0))) $B --suite seed84 --cache /tmp/cache --systems eager,irforge -o $R/seed84 > $R/seed84.log 2>&1; echo "rc=$?"
grep -E "geomean|README row" $R/seed84.log | cut -c1-220
echo "all $((SECONDS - t0)) s"
