#!/usr/bin/env bash
# Wide wgmma tiles cut to whole waves of blocks (heuristics._wide_columns: L7 128 x 192, L2 128 x 176, L10 128 x 224)
# on an H100/H200, about 6 minutes:
# 1. bench/contraction_sweep.py on the llm suite's prefill linears (bf16): the default against the 128 x 256 tiles
#    it took before (`wgmma.128x256.s4p2`, a producer warp as the default gives wide tiles) and without the producer
#    warp (`ws-off`); tiles near whole waves for the small products (L1, L4, L8): OUT/sweep.{json,log};
# 2. the llm suite at the defaults: OUT/llm/.
#
#   bench/wave_tiles_ab.sh OUT_DIR
set -euo pipefail
out=${1:?usage: bench/wave_tiles_ab.sh OUT_DIR}
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
jobs=${JOBS:-16}
work=$(mktemp -d)
mkdir -p "$out"
small=default,ws-off,wgmma.64x160.s4,wgmma.128x80.s4,wgmma.64x224.s4,wgmma.128x112.s4,wgmma.64x112.s4
small+=,wgmma.128x64.s4,wgmma.64x128.s4
"$py" bench/contraction_sweep.py prepare "$work/sweep" --shapes 'L2,L3,L7,L9,L10' --dtypes bf16 \
  --variants default,ws-off,wgmma.128x256.s4p2 --jobs "$jobs" >"$out/prepare.log" 2>&1
"$py" bench/contraction_sweep.py prepare "$work/sweep" --shapes 'L1,L4,L8' --dtypes bf16 --variants "$small" \
  --jobs "$jobs" >>"$out/prepare.log" 2>&1
"$py" bench/contraction_sweep.py run "$work/sweep" -o "$out/sweep.json" | tee "$out/sweep.log"
"$py" -m irforge.tools.cli bench --suite llm --compile-only --cache "$work/cache" --jobs "$jobs" >/dev/null
"$py" -m irforge.tools.cli bench --suite llm --cache "$work/cache" --systems eager,irforge -o "$out/llm"
