#!/usr/bin/env bash
# Attention schedules, before and after the lanes that share a row's scores and the causal chunks skipped
# (docs/dialects/tile.md, "Attention"): the seed84 attention cases and the llm decode cases F4-F6, timed against
# eager by `irforge bench` with the default pipeline (system `irforge`) and the previous schedule (system `old`:
# `tile-blockify{lanes=1}`, a thread per row; for seed84's prefill `tile-split-reduce{splits=1}`, no prefill was
# split before; `lower-to-kernel{skip-masked=false}`, every chunk computed). `old` emits the same CUDA as the
# commit before these changes. seed84 also times `noskip`: the new schedule with every chunk computed.
#
#   bench/attention_ab.sh OUT_DIR                                   # on a GPU: OUT_DIR/{seed84,llm}.{json,md}
#   bench/attention_ab.sh OUT_DIR --compile-only --cache CACHE --jobs 8   # ahead, on any machine (no GPU)
#   bench/attention_ab.sh OUT_DIR --cache CACHE                     # then on the GPU, compiling nothing
set -euo pipefail
out=${1:?usage: bench/attention_ab.sh OUT_DIR [irforge bench options]}
shift
here=$(cd "$(dirname "$0")/.." && pwd)
irforge=${IRFORGE:-irforge}
# The whole lowering with loop-to-tile's passes on one line, some options overridden ("pass{opts}" replacing
# "pass"), and lower-to-kernel's options ($lower).
lowering() {
  local text
  text=$(sed 's/#.*//' "$here/pipelines/loop-to-tile.pipeline" | tr -d ' \n')
  for o in "$@"; do text=$(sed "s/\(^\|,\)${o%%\{*}\(,\|$\)/\1$o\2/" <<<"$text"); done
  echo "torch-to-tensor,tensor-to-loop,$text,lower-to-kernel$lower,cse,dce,kernel-to-cuda"
}
lower='{skip-masked=false}'
old_prefill=$(lowering 'tile-blockify{lanes=1}' 'tile-split-reduce{splits=1}')
old_decode=$(lowering 'tile-blockify{lanes=1}')
noskip=$(lowering)
"$irforge" bench --suite seed84 --cases 'sdpa*,naive_attn*' --systems eager,irforge \
  --variant "old=$old_prefill" --variant "noskip=$noskip" --max-seconds-per-case 2 -o "$out" "$@"
"$irforge" bench --suite llm --cases 'F4,F5,F6' --systems eager,irforge \
  --variant "old=$old_decode" --max-seconds-per-case 2 -o "$out" "$@"
