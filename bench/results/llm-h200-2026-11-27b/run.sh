#!/usr/bin/env bash
export IRFORGE_GIT_REV=$(cat .dev/rev)
R=/tmp/res; mkdir -p $R
trap 'cd /tmp && tar czf $OUT/res.tgz res' EXIT
nvidia-smi --query-gpu=name --format=csv,noheader
python -m irforge.tools.cli bench --suite llm --compile-only --cache bench/cache --jobs 16 > $R/compile.log 2>&1; tail -1 $R/compile.log
CHUNK_SECONDS=200 PYTHON=python timeout 260 bash bench/run_suites.sh llm $R > $R/llm.log 2>&1; grep -E "geomean" $R/llm/llm.md
timeout 120 ncu --section SpeedOfLight -k regex:'^k_linear_' -c 2 python -m irforge.tools.cli bench --suite llm --cases L12 --systems eager,irforge --reps 3 -o $R/n12 > $R/ncu_l12.txt 2>&1
grep -E "k_linear|Duration|DRAM Throughput" $R/ncu_l12.txt
timeout 280 python bench/models_gpu.py run --dir build/models --out $R/models --only tinyllama-bf16 smollm2-bf16 tinyllama-bf16-prefill512 --no-torch-compile > $R/models.log 2>&1
tail -4 $R/models.log | cut -c1-1500
