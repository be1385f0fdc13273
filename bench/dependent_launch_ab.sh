#!/usr/bin/env bash
# Programmatic dependent launch (passes/kernel/dependent_launch.py) on and off, on a GPU:
# 1. TinyLlama-1.1B bf16 through `irforge generate` (the decode step a CUDA graph), compiled with the default pipeline
#    and with `kernel-dependent-launch` left out of pipelines/tile-to-kernel.pipeline (the file is edited for that
#    compile and restored), tokens and logits checked as bench/models_gpu.py does: OUT/{pdl,base}/;
# 2. seed84 and llm through `irforge bench`, system `irforge` (the default) beside variant `nopdl` (the same lowering
#    without the pass): OUT/{seed84,llm}/.
#
#   bench/dependent_launch_ab.sh OUT_DIR
set -euo pipefail
out=${1:?usage: bench/dependent_launch_ab.sh OUT_DIR}
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
pipe=pipelines/tile-to-kernel.pipeline
saved=$(mktemp)
cp "$pipe" "$saved"
trap 'cp "$saved" "$pipe"' EXIT

nopdl=torch-to-tensor,tensor-to-loop,loop-to-tile,lower-to-kernel,cse,dce,kernel-to-cuda
bench() { "$py" -m irforge.tools.cli bench --suite "$1" --systems eager,irforge --variant "nopdl=$nopdl" "${@:2}"; }
# the suites compile (all cores) while the default model does; the pipeline file is edited only after both
(for suite in seed84 llm; do bench "$suite" --compile-only --cache build/ab-cache --jobs "${JOBS:-12}" >/dev/null; done) &
suites=$!
"$py" bench/models_gpu.py compile --dir build/ab-pdl --only tinyllama-bf16
wait $suites
sed -i '/^kernel-dependent-launch/d' "$pipe"
"$py" bench/models_gpu.py compile --dir build/ab-base --only tinyllama-bf16
cp "$saved" "$pipe"
"$py" bench/models_gpu.py run --dir build/ab-pdl --out "$out/pdl" --only tinyllama-bf16 || true # bf16 logits fail
"$py" bench/models_gpu.py run --dir build/ab-base --out "$out/base" --only tinyllama-bf16 --no-torch-compile || true
for suite in seed84 llm; do
  bench "$suite" --cache build/ab-cache --max-seconds-per-case 2 -o "$out/$suite"
done
