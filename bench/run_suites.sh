#!/usr/bin/env bash
# Both benchmark suites (seed84, llm) on a GPU, within the device machine's limits: compile ahead on any machine,
# carry the cache, time each suite in one command that stops itself in time and resumes where it stopped.
#
#   bench/run_suites.sh compile        # no GPU needed: both suites into $BENCH_CACHE (bench/cache), ~2 min here
#   bench/run_suites.sh seed84 OUT     # on the GPU: OUT/seed84/seed84.{json,md,png}
#   bench/run_suites.sh llm OUT        # on the GPU: OUT/llm/llm.{json,md,png}
#
# A timed chunk stops after $CHUNK_SECONDS (default 480) keeping every case it finished (the JSON is written after
# each); running the same command again resumes with the cases left. torch.compile (max-autotune: minutes of
# autotuning per case) is left out unless WITH_COMPILE=1; the report says which. CASES='L*,!L9' narrows a chunk.
# Without matplotlib on the GPU machine the chart is drawn later: irforge bench --merge OUT/llm/llm.json -o DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${BENCH_CACHE:-bench/cache}
py=${PYTHON:-python3}  # the Python irforge is installed in (on the GPU machine, python3)
case "${1:-}" in
  compile)
    for suite in seed84 llm; do "$py" -m irforge.tools.cli bench --suite "$suite" --compile-only --cache "$cache"; done
    du -sh "$cache"
    ;;
  seed84 | llm)
    out=${2:?the output folder, e.g. \$OUT}
    systems=eager,irforge${WITH_COMPILE:+,compile}
    timeout --signal=INT "${CHUNK_SECONDS:-480}" "$py" -m irforge.tools.cli bench --suite "$1" --cache "$cache" \
      --systems "$systems" --resume -o "$out/$1" ${CASES:+--cases "$CASES"} ||
      { rc=$?; [ $rc = 124 ] && echo "stopped after ${CHUNK_SECONDS:-480} s: run the same command again to go on"; exit $rc; }
    ;;
  *)
    sed -n '2,13p' "$0"
    exit 2
    ;;
esac
