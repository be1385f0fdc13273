#!/usr/bin/env bash
# Both benchmark suites (seed84, llm) on a GPU, within the device machine's limits: compile ahead on any machine,
# carry the cache, time each suite in one command that stops itself in time and resumes where it stopped.
#
#   bench/run_suites.sh compile        # no GPU needed: both suites into $BENCH_CACHE (bench/cache, ~3 MiB); JOBS=N
#   bench/run_suites.sh seed84 [OUT]   # on the GPU: results in bench/cache/runs/seed84/, copied to OUT/seed84/
#   bench/run_suites.sh llm [OUT]      # on the GPU: the same for llm
#
# A timed chunk stops after $CHUNK_SECONDS (default 480) keeping every case it finished (the JSON is written after
# each, under the cache, which git ignores); the same command again resumes with the cases left (on a machine that
# lost the folder, put the partial seed84.json back in bench/cache/runs/seed84/ first). torch.compile (max-autotune:
# minutes of autotuning per case) is left out unless WITH_COMPILE=1; the report says which. CASES='L*,!L9' narrows
# a chunk (a glob after ! leaves cases out). Without matplotlib the chart is drawn later, on a machine that has it:
#   irforge bench --merge OUT/llm/llm.json -o DIR
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${BENCH_CACHE:-bench/cache}
py=${PYTHON:-python3} # the Python irforge is installed in (on the GPU machine, python3)
case "${1:-}" in
  compile)
    for suite in seed84 llm; do "$py" -m irforge.tools.cli bench --suite "$suite" --compile-only --cache "$cache" --jobs "${JOBS:-1}"; done
    du -sh "$cache"
    ;;
  seed84 | llm)
    runs=$cache/runs/$1
    dest=${2:-}
    trap '[ -z "$dest" ] || [ ! -d "$runs" ] || { mkdir -p "$dest" && cp -r "$runs" "$dest/"; }' EXIT
    systems=eager,irforge${WITH_COMPILE:+,compile}
    timeout --signal=INT --kill-after=30 "${CHUNK_SECONDS:-480}" "$py" -m irforge.tools.cli bench --suite "$1" --cache "$cache" \
      --systems "$systems" --resume -o "$runs" ${CASES:+--cases "$CASES"} ||
      {
        rc=$?
        [ $rc != 124 ] || echo "stopped after ${CHUNK_SECONDS:-480} s: run the same command again to go on"
        exit $rc
      }
    ;;
  *)
    sed -n '2,15p' "$0"
    exit 2
    ;;
esac
