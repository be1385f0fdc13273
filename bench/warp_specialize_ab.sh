#!/usr/bin/env bash
# A producer warp issuing the copies (tile-warp-specialize) on an H100/H200, about 8 minutes:
# 1. the llm suite's prefill linears (bf16) through bench/contraction_sweep.py: the default pipeline (producer warp
#    where wgmma reads the slabs) against `ws-off` (the block's threads issue the copies, as before the pass), and
#    rings and tiles under the producer: OUT/sweep.{json,log};
# 2. the llm suite at the defaults: OUT/llm/; 3. seed84's softmax rows twice (issue 10's s32 cases): OUT/softmax{1,2}/.
#
#   bench/warp_specialize_ab.sh OUT_DIR
set -euo pipefail
out=${1:?usage: bench/warp_specialize_ab.sh OUT_DIR}
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
jobs=${JOBS:-16}
work=$(mktemp -d)
mkdir -p "$out"
variants=default,ws-off,ws.s3,ws.s5,ws.s6,ws.128x128.s4,ws.128x128.s6,ws.128x256.s3,ws.64x256.s4,ws.64x128.s6,ws.128x64.s6
"$py" bench/contraction_sweep.py prepare "$work/sweep" --shapes 'L1,L2,L3,L4,L7,L8,L9,L10' --dtypes bf16 \
  --variants "$variants" --jobs "$jobs" >"$out/prepare.log" 2>&1
"$py" bench/contraction_sweep.py run "$work/sweep" -o "$out/sweep.json" | tee "$out/sweep.log"
"$py" -m irforge.tools.cli bench --suite llm --compile-only --cache "$work/cache" --jobs "$jobs" >/dev/null
"$py" -m irforge.tools.cli bench --suite llm --cache "$work/cache" --systems eager,irforge -o "$out/llm"
for i in 1 2; do
  "$py" -m irforge.tools.cli bench --suite seed84 --cases 'softmax.*' --cache "$work/cache" --systems eager,irforge \
    -o "$out/softmax$i"
done
