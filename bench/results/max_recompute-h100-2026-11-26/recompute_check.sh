#!/usr/bin/env bash
# One-off: loop-fuse-broadcast max-recompute 2.0 as the default: both suites and TinyLlama bf16 decode.
set -uo pipefail
out=$1
PYTHON=python JOBS=12 bash bench/run_suites.sh compile > $out/scompile.log 2>&1 &
suites=$!
timeout 200 python bench/models_gpu.py compile --dir build/models --only tinyllama-bf16 > $out/mcompile.log 2>&1 &
models=$!
wait $suites $models
CHUNK_SECONDS=150 bash bench/run_suites.sh seed84 $out > $out/seed84.log 2>&1
CHUNK_SECONDS=120 bash bench/run_suites.sh llm $out > $out/llm.log 2>&1
timeout 120 python bench/models_gpu.py run --dir build/models --out $out/m --only tinyllama-bf16 > $out/models.log 2>&1
grep -E "tokens/s|bandwidth" $out/models.log
grep -h -A4 "^## Summary" $out/seed84/seed84.md $out/llm/llm.md | cut -c1-400
