#!/usr/bin/env bash
# Programmatic dependent launch (passes/kernel/dependent_launch.py) on and off, on a GPU:
# 1. TinyLlama-1.1B bf16 through `irforge generate` (the decode step a CUDA graph), compiled with the default pipeline
#    and with `kernel-dependent-launch` left out of pipelines/tile-to-kernel.pipeline (the file is edited for that
#    compile and restored), tokens and logits checked as bench/models_gpu.py does: OUT/{pdl,base}/;
# 2. seed84 and llm through `irforge bench`, system `irforge` (the default) beside variant `nopdl` (the same lowering
#    without the pass): OUT/{seed84,llm}/.
#
#   bench/dependent_launch_ab.sh OUT_DIR models     # 1 (about 4 minutes on an H100 machine of 16 cores)
#   bench/dependent_launch_ab.sh OUT_DIR suites     # 2 (about 6 minutes)
set -euo pipefail
out=${1:?usage: bench/dependent_launch_ab.sh OUT_DIR models|suites}
what=${2:?usage: bench/dependent_launch_ab.sh OUT_DIR models|suites}
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
pipe=pipelines/tile-to-kernel.pipeline
saved=$(mktemp)
cp "$pipe" "$saved"
trap 'cp "$saved" "$pipe"' EXIT

nopdl=torch-to-tensor,tensor-to-loop,loop-to-tile,lower-to-kernel,cse,dce,kernel-to-cuda
bench() { "$py" -m irforge.tools.cli bench --suite "$1" --systems eager,irforge --variant "nopdl=$nopdl" "${@:2}"; }
if [ "$what" = suites ]; then
  for suite in seed84 llm; do bench "$suite" --compile-only --cache build/ab-cache --jobs "${JOBS:-12}" >/dev/null; done
  for suite in seed84 llm; do bench "$suite" --cache build/ab-cache --max-seconds-per-case 2 -o "$out/$suite"; done
  exit
fi
"$py" bench/models_gpu.py compile --dir build/ab-pdl --only tinyllama-bf16
sed -i '/^kernel-dependent-launch/d' "$pipe"
"$py" bench/models_gpu.py compile --dir build/ab-base --only tinyllama-bf16
cp "$saved" "$pipe"
# both exit 1 while the bf16 logits check fails (irforge as far from HF as HF bf16 is from fp32: see the JSON)
"$py" bench/models_gpu.py run --dir build/ab-pdl --out "$out/pdl" --only tinyllama-bf16 || true
"$py" bench/models_gpu.py run --dir build/ab-base --out "$out/base" --only tinyllama-bf16 --no-torch-compile || true
