#!/usr/bin/env bash
# Attention schedules, before and after the lanes that share a row's scores (docs/dialects/tile.md, "Attention"):
# the seed84 attention cases and the llm decode cases F4-F6, timed against eager by `irforge bench`, each with the
# default pipeline (system `irforge`) and the previous schedule (system `old`). The previous schedule is the same
# pipeline with `tile-blockify{lanes=1}` (a thread per row) and, for seed84's prefill, `tile-split-reduce{splits=1}`
# (no prefill was split before); both reproduce the earlier defaults exactly (the emitted CUDA is the same).
#
#   bench/attention_ab.sh OUT_DIR                                   # on a GPU: OUT_DIR/{seed84,llm}.{json,md}
#   bench/attention_ab.sh OUT_DIR --compile-only --cache CACHE --jobs 8   # ahead, on any machine (no GPU)
#   bench/attention_ab.sh OUT_DIR --cache CACHE                     # then on the GPU, compiling nothing
set -euo pipefail
out=${1:?usage: bench/attention_ab.sh OUT_DIR [irforge bench options]}
shift
here=$(cd "$(dirname "$0")/.." && pwd)
irforge=${IRFORGE:-irforge}
# loop-to-tile's passes on one line, with some options overridden: "pass{opts}" replacing "pass".
loop_to_tile() {
  local text
  text=$(sed 's/#.*//' "$here/pipelines/loop-to-tile.pipeline" | tr -d ' \n')
  for o in "$@"; do text=$(sed "s/\(^\|,\)${o%%\{*}\(,\|$\)/\1$o\2/" <<<"$text"); done
  echo "torch-to-tensor,tensor-to-loop,$text,tile-to-kernel,kernel-to-cuda"
}
old_prefill=$(loop_to_tile 'tile-blockify{lanes=1}' 'tile-split-reduce{splits=1}')
old_decode=$(loop_to_tile 'tile-blockify{lanes=1}')
"$irforge" bench --suite seed84 --cases 'sdpa*,naive_attn*' --systems eager,irforge \
  --variant "old=$old_prefill" --max-seconds-per-case 2 -o "$out" "$@"
"$irforge" bench --suite llm --cases 'F4,F5,F6' --systems eager,irforge \
  --variant "old=$old_decode" --max-seconds-per-case 2 -o "$out" "$@"
