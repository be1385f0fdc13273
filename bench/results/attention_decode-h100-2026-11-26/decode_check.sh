#!/usr/bin/env bash
# One-off: decode attention lanes rule, llm decode cases beside the old 4-lane rule (head dim 64), and TinyLlama.
set -uo pipefail
out=$1
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n')
old="torch-to-tensor,tensor-to-loop,$(sed 's/tile-blockify/tile-blockify{lanes=4}/' <<<"$base"),tile-to-kernel,kernel-to-cuda"
python bench/models_gpu.py compile --dir build/m --only tinyllama-bf16 > $out/mcompile.log 2>&1 &
python -m irforge.tools.cli bench --suite llm --cases 'F4,F5,F6,D1,D2' --systems eager,irforge --variant "lanes4=$old" \
  --compile-only --cache build/c --jobs 10 > /dev/null 2>&1
wait
python -m irforge.tools.cli bench --suite llm --cases 'F4,F5,F6,D1,D2' --systems eager,irforge --variant "lanes4=$old" \
  --cache build/c --max-seconds-per-case 2 -o $out/llm_decode > $out/llm_decode.log 2>&1
grep -A12 "^| case" $out/llm_decode/llm.md | cut -c1-400
python bench/models_gpu.py run --dir build/m --out $out/m --only tinyllama-bf16 > $out/models.log 2>&1
grep -E "tokens/s|bandwidth" $out/models.log
