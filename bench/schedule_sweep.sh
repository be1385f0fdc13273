#!/usr/bin/env bash
# The schedule sweep behind passes/tile/heuristics.py's reduction defaults: row reductions (RMSNorm, softmax, the
# seed's softmax; f32 and bf16) under the default schedule and under fixed choices of threads per row
# (tile-cooperative-reduce), rows per block (tile-blockify: default fills 256 threads, r1 = one row per block) and
# shared-memory staging, timed beside eager by bench/compiled_memory_bound.py. On a GPU:
#     bench/schedule_sweep.sh OUT_DIR
set -euo pipefail
out=${1:-bench/results/schedule_sweep}
pipe() { echo "map-to-tile,kernel(tile-cooperative-reduce{threads=$1},tile-blockify$2,tile-vectorize$3),tile-to-kernel,kernel-to-cuda"; }
variants=()
for t in 64 128 256; do
  variants+=(--variant "t$t=$(pipe $t '' '')")
  variants+=(--variant "t$t r1 stage=$(pipe $t '{threads=1}' ',tile-stage-inputs')")
done
variants+=(--variant "t128 r1=$(pipe 128 '{threads=1}' '')")
for c in "rms_norm" "softmax " "seed"; do
  timeout "${SWEEP_TIMEOUT:-150}" python3 "$(dirname "$0")/compiled_memory_bound.py" --out "$out/${c%% *}" --no-compile \
    --reps 50 --cases "$c" "${variants[@]}" || echo "sweep of '$c' failed or timed out"
done
