#!/usr/bin/env bash
# One-off diagnostics (not part of the repo): decode kernels under ncu; softmax s32 schedule sweep.
set -uo pipefail
out=$1
ids=27219,20382,16356,8633,9850,1311,2407,528,5608,26024,20781,29208,16116,19412,31063,23343
which nsys || true
# 1. the decode step's kernels, one by one (ncu flushes caches before each): skip the prefill and warm-up launches
timeout 200 ncu --csv --page raw --launch-skip 600 --launch-count 240 -k regex:"^(layer|prologue|epilogue)_k" \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
  python -m irforge.tools.cli generate tinyllama-1.1b --ids $ids -n 32 --dtype bf16 --compiled .dev/m/tinyllama-bf16.json --no-torch-compile > $out/ncu_decode.csv 2> $out/ncu_decode.err
grep -n '"ID"' $out/ncu_decode.csv | head -1 | cut -d: -f1 | xargs -I{} tail -n +{} $out/ncu_decode.csv > $out/ncu_decode.clean.csv
python .dev/ncu_decode.py $out/ncu_decode.clean.csv > $out/ncu_decode.txt 2>&1
cat $out/ncu_decode.txt | head -40
# 2. softmax s32 rows: blocks of 1..16 rows, 4..32 threads a row
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n')
v() { echo "torch-to-tensor,tensor-to-loop,$(sed "s/tile-blockify/tile-blockify{threads=$1}/; s/tile-cooperative-reduce/tile-cooperative-reduce{threads=$2}/" <<<"$base"),tile-to-kernel,kernel-to-cuda"; }
timeout 150 python -m irforge.tools.cli bench --suite seed84 --cases 'softmax.*.s32' --systems eager,irforge \
  --variant "y1=$(v 1 0)" --variant "y2=$(v 2 0)" --variant "y8=$(v 8 0)" --variant "y16=$(v 16 0)" \
  --variant "c4=$(v 0 4)" --variant "c16=$(v 0 16)" --variant "c32=$(v 0 32)" -o $out/softmax > $out/softmax.log 2>&1
grep -A30 "Cases" $out/softmax/seed84.md | head -12
