# c50: seed84 (untuned and tuned) and llm at the commit under test, on one H100
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
for s in seed84 llm; do python -m irforge.tools.cli bench --suite $s --compile-only --cache /tmp/cache --jobs 16 > $R/compile_$s.log 2>&1; tail -1 $R/compile_$s.log; done
echo "compile $((SECONDS - t0)) s"
timeout 260 python -m irforge.tools.cli bench --suite seed84 --cache /tmp/cache --systems eager,irforge --tuned -o $R/seed84 > $R/seed84.log 2>&1
grep -E "geomean|^- " $R/seed84/seed84.md | head -8
echo "seed84 $((SECONDS - t0)) s"
timeout 150 python -m irforge.tools.cli bench --suite llm --cache /tmp/cache --systems eager,irforge -o $R/llm > $R/llm.log 2>&1
grep -E "geomean" $R/llm/llm.md; grep -E "^\| (F[1-6]|L4|L12|D[1-4]) " $R/llm/llm.md | cut -c1-200
echo "all $((SECONDS - t0)) s"
