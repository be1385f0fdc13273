# Re-tune seed84 (and llm) kernels for the current schedule: part $1, seed84 case globs $2, llm case globs $3.
# The database goes on from .dev/tune.sqlite (brought back from the previous part) and comes back in $R/db.sqlite.
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
mkdir -p bench/cache; [ -f .dev/tune.sqlite ] && cp .dev/tune.sqlite bench/cache/tune.sqlite
export TUNE_CACHE=/tmp/tune_cache
timeout ${TUNE_SECONDS:-520} python bench/tune_gpu.py run $R/tune_$1 --cases "$2" ${3:+--llm-cases "$3"} --budget 40 --time 8 \
  --db bench/cache/tune.sqlite --no-plant --jobs 16 > $R/tune_$1.log 2>&1
echo "tune rc=$? at $((SECONDS - t0)) s"
cp bench/cache/tune.sqlite $R/db.sqlite
grep -E "^ok|FAILED|tuning:|bench --tuned|geomean" $R/tune_$1.log | head -20
