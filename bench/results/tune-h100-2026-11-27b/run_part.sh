#!/usr/bin/env bash
# Tune seed84 (part $1: case globs $2), the tuner's database carried in bench/cache/tune.sqlite between calls.
R=${OUT_DIR:-results}; mkdir -p $R  # on a GPU machine, irforge installed
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$(date +%s)
export TUNE_CACHE=bench/cache/tune
timeout 540 python bench/tune_gpu.py run $R/tune_$1 --cases "$2" ${3:+--llm-cases "$3"} --budget 40 --time 8 --db bench/cache/tune.sqlite ${PLANT:---no-plant} --jobs 16 > $R/tune_$1.log 2>&1
echo "tune rc=$? at $(( $(date +%s) - t0 )) s"
cp bench/cache/tune.sqlite $R/tune_$1/db.sqlite 2>/dev/null
grep -E "^ok|FAILED|tuning:|bench --tuned|geomean" $R/tune_$1.log | head -20
echo "total $(( $(date +%s) - t0 )) s"
