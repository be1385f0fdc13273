#!/usr/bin/env bash
R=${OUT_DIR:-results}; mkdir -p $R  # on a GPU machine, irforge installed
t0=$(date +%s)
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
timeout 300 python -m irforge.tools.cli bench --suite llm --cases "F4,F6,F5" --systems eager,irforge \
  --variant "s8=$(V tile-split-reduce splits=8)" --variant "s16=$(V tile-split-reduce splits=16)" --variant "s2=$(V tile-split-reduce splits=2)" \
  --variant "r2=$(V tile-multi-buffer stages=2)" --variant "r4=$(V tile-multi-buffer stages=4)" --variant "s8r2=$(V tile-split-reduce splits=8 tile-multi-buffer stages=2)" \
  -o $R/decode > $R/decode.log 2>&1
grep -A6 "^| case" $R/decode/llm.md | cut -c1-900
echo "total $(( $(date +%s) - t0 )) s"
