#!/usr/bin/env bash
# Sweep 7 (branch `contract`, bench/notes/contractions.md): on an H100, the contract branch's defaults against the
# options main chose at 6dccff8 (`main`) and a deeper split, on the shapes its changes touch; A's slab swizzled
# apart against the same schedule unswizzled (both copied by the threads); then seed84's
# contraction families (matmul, matmul_add, silu_mul_matmul) against eager, compared with the committed
# scoreboard. About 5 minutes. Usage: bash bench/contraction_sweep7.sh [OUT]
set -euo pipefail
OUT=${1:-bench/results/contraction_sweep7}
JOBS=${JOBS:-12}
PY=${PYTHON:-python3}
IRF=${IRFORGE:-irforge}
SHAPES='TL.down.s512,TL.down.s512.add,TL.down.s128,TL.down.s128.add,QW.down.s128,QW.down.s128.add,QW.down.s32'
SHAPES+=',QW.kv.s32,TL.kv.s32,TL.kv.s128'
CASES='matmul.*,matmul_add.*,silu_mul_matmul.*'
WORK=$(mktemp -d)  # programs and CUBINs stay out of OUT
mkdir -p "$OUT"
"$PY" bench/contraction_sweep.py prepare "$WORK/sweep" --shapes "$SHAPES" --variants main,default,split16 --jobs "$JOBS"
"$PY" bench/contraction_sweep.py prepare "$WORK/sweep" --shapes TL.down.s512,TL.down.s128,QW.down.s128 \
  --variants no-tma,no-tma.aswz --jobs "$JOBS"
"$PY" bench/contraction_sweep.py run "$WORK/sweep" -o "$OUT/sweep7.json" | tee "$OUT/sweep7.log"
"$IRF" bench --suite seed84 --cases "$CASES" --compile-only --cache "$WORK/cache" --jobs "$JOBS"
"$IRF" bench --suite seed84 --cases "$CASES" --cache "$WORK/cache" --systems eager,irforge --max-seconds-per-case 2 \
  -o "$OUT/seed84"
"$IRF" bench --compare bench/results/seed84-h100-2026-11-24b/seed84.json "$OUT/seed84/seed84.json" \
  | tee "$OUT/compare.txt"
