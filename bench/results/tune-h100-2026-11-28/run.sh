# c78: tune again the 4 kernels whose winners tile-longest-first stranded (bench/carry_winners.py dropped them):
# seed84 sdpa.TL.s32, sdpa.QW.s32 and llm F1, F2; a fresh database, 100 candidates and 30 s a kernel at most;
# then eager, untuned and tuned timed side by side on those cases
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
export TUNE_CACHE=/tmp/tune_cache
timeout 500 python bench/tune_gpu.py run $R/tune --cases 'sdpa.TL.s32,sdpa.QW.s32' --llm-cases 'F1,F2' --budget 100 --time 30 \
  --no-plant --jobs 16 > $R/tune.log 2>&1
echo "tune rc=$? at $((SECONDS - t0)) s"
grep -E "^ok|FAILED|tuning:|bench --tuned|geomean|x " $R/tune.log | head -30
grep -E "^\| (sdpa|F)" $R/tune/bench/*.md | cut -c1-250
