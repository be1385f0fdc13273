#!/usr/bin/env bash
# Attention schedules, before and after the keyed chunks (passes/tile_to_kernel/keyed.py: each chunk of keys takes
# its scores and their max first, rescales O and l once, then adds each key's exp(score - max) times its V row):
# the seed84 attention cases and the llm decode cases F4-F6, timed against eager by `irforge bench` with the default
# pipeline (system `irforge`) and the schedule before (system `old`: `lower-to-kernel{keyed-chunks=false}`, the
# chunk folded one key at a time, the same CUDA as the commit before the change). seed84 also times `noskip`: the
# default with every causal chunk computed (`lower-to-kernel{skip-masked=false}`), and `rows32`, `rows16`: the
# default with blocks of 32 or 16 query rows (`tile-blockify{bm=...}`: more, cheaper blocks, to see whether evening
# out the causal blocks' uneven costs over the multiprocessors pays).
#
#   bench/attention_ab.sh OUT_DIR                                   # on a GPU: OUT_DIR/{seed84,llm}.{json,md}
#   bench/attention_ab.sh OUT_DIR --compile-only --cache CACHE --jobs 8   # ahead, on any machine (no GPU)
#   bench/attention_ab.sh OUT_DIR --cache CACHE                     # then on the GPU, compiling nothing
set -euo pipefail
out=${1:?usage: bench/attention_ab.sh OUT_DIR [irforge bench options]}
shift
here=$(cd "$(dirname "$0")/.." && pwd)
irforge=${IRFORGE:-irforge}
# The whole lowering with lower-to-kernel's options ($1: "{...}" or "") and loop-to-tile's passes on one line,
# some options overridden (the other arguments: "pass{opts}" replacing "pass").
lowering() {
  local text lower=$1
  shift
  text=$(sed 's/#.*//' "$here/pipelines/loop-to-tile.pipeline" | tr -d ' \n')
  for o in "$@"; do text=$(sed "s/\(^\|,\)${o%%\{*}\(,\|$\)/\1$o\2/" <<<"$text"); done
  echo "torch-to-tensor,tensor-to-loop,$text,lower-to-kernel$lower,cse,dce,kernel-to-cuda"
}
old=$(lowering '{keyed-chunks=false}')
noskip=$(lowering '{skip-masked=false}')
rows32=$(lowering '' 'tile-blockify{bm=32}')
rows16=$(lowering '' 'tile-blockify{bm=16}')
"$irforge" bench --suite seed84 --cases 'sdpa*,naive_attn*' --systems eager,irforge \
  --variant "old=$old" --variant "noskip=$noskip" --variant "rows32=$rows32" --variant "rows16=$rows16" --max-seconds-per-case 2 -o "$out" "$@"
"$irforge" bench --suite llm --cases 'F4,F5,F6' --systems eager,irforge \
  --variant "old=$old" --max-seconds-per-case 2 -o "$out" "$@"
