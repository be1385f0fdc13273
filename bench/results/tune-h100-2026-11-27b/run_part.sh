#!/usr/bin/env bash
# Tune seed84 (part $1: case globs $2), the tuner's database carried in bench/cache/tune.sqlite between calls.
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 PATH=/opt/torch/.venv/bin:$PATH
python -m pip install -q --no-index --no-deps --target /tmp/site .dev/lark*.whl 2>/dev/null
python -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null 2>&1
export IRFORGE_GIT_REV=$(cat .dev/rev)
R=/tmp/res; mkdir -p $R
trap 'cd /tmp && tar czf $OUT/res.tgz res' EXIT
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$(date +%s)
export TUNE_CACHE=bench/cache/tune
timeout 540 python bench/tune_gpu.py run $R/tune_$1 --cases "$2" ${3:+--llm-cases "$3"} --budget 40 --time 8 --db bench/cache/tune.sqlite ${PLANT:---no-plant} --jobs 16 > $R/tune_$1.log 2>&1
echo "tune rc=$? at $(( $(date +%s) - t0 )) s"
cp bench/cache/tune.sqlite $R/tune_$1/db.sqlite 2>/dev/null
grep -E "^ok|FAILED|tuning:|bench --tuned|geomean" $R/tune_$1.log | head -20
echo "total $(( $(date +%s) - t0 )) s"
