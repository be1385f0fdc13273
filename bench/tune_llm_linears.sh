#!/usr/bin/env bash
# `irforge tune` on the llm suite's prefill linears whose heuristic schedules are furthest from cuBLAS, on a GPU
# (about 6 minutes): each kernel searched for BUDGET candidates or SECONDS (defaults 48 and 60), then the cases timed
# with the heuristic's schedule and the tuned one beside eager. OUT: tune.log, tune.sqlite, winners.json, llm/.
#
#   bench/tune_llm_linears.sh OUT [CASES]      # CASES: default L1,L3,L4,L8
set -euo pipefail
out=${1:?usage: bench/tune_llm_linears.sh OUT [CASES]}
cases=${2:-L1,L3,L4,L8}
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
mkdir -p "$out"
"$py" -m irforge.tools.cli tune --suite llm --cases "$cases" --budget "${BUDGET:-48}" --time "${SECONDS_PER_KERNEL:-60}" \
  --db "$out/tune.sqlite" --retune -v 2>&1 | tee "$out/tune.log" | tail -80
"$py" -m irforge.tools.cli tune --suite llm --cases "$cases" --db "$out/tune.sqlite" --export "$out/winners.json"
"$py" -m irforge.tools.cli bench --suite llm --cases "$cases" --systems eager,irforge --tuned --db "$out/tune.sqlite" \
  -o "$out/llm" | tail -12
