#!/usr/bin/env bash
# The schedule sweep behind passes/tile/heuristics.py's reduction defaults: the row reductions of both suites
# (RMSNorm and softmax: llm R1-R8, S1-S4 in bf16; seed84 rmsnorm.* and softmax.* in f32) under the default schedule
# and under fixed choices of threads per row (tile-cooperative-reduce), rows per block (tile-blockify: the default
# fills 256 threads, r1 = one row per block) and shared-memory staging, each a system of `irforge bench` timed
# beside eager.
#
#   bench/schedule_sweep.sh compile          # no GPU needed: every variant of every case into $BENCH_CACHE
#   bench/schedule_sweep.sh OUT              # on the GPU: OUT/llm/, OUT/seed84/
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${BENCH_CACHE:-bench/cache}
py=${PYTHON:-python3}  # the Python irforge is installed in
pipe() {
  echo "torch-to-tensor,tensor-to-loop,map-to-tile,kernel(tile-cooperative-reduce{threads=$1},tile-blockify$2,tile-vectorize$3),tile-to-kernel,kernel-to-cuda"
}
variants=()
for t in 64 128 256; do
  variants+=(--variant "t$t=$(pipe $t '' '')")
  variants+=(--variant "t$t r1 stage=$(pipe $t '{threads=1}' ',tile-stage-inputs')")
done
variants+=(--variant "t128 r1=$(pipe 128 '{threads=1}' '')")
mode=(--systems eager,irforge --reps 50 --cache "$cache")
[ "${1:?compile, or the output folder}" = compile ] && mode+=(--compile-only) || mode+=(--resume)
for spec in "llm R*,S*" "seed84 rmsnorm.*,softmax.*"; do
  suite=${spec%% *}
  out=()
  [ "$1" = compile ] || out=(-o "$1/$suite")
  timeout "${SWEEP_TIMEOUT:-240}" "$py" -m irforge.tools.cli bench --suite "$suite" --cases "${spec#* }" \
    "${mode[@]}" "${variants[@]}" "${out[@]}" || echo "sweep of $suite stopped (exit $?): run it again to go on"
done
