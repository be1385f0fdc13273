#!/usr/bin/env bash
R=${OUT_DIR:-results}; mkdir -p $R  # on a GPU machine, irforge installed
t0=$(date +%s)
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
timeout 400 python -m irforge.tools.cli bench --suite seed84 --cases "sdpa.*,naive_attn.*" --systems eager,irforge \
  --variant "l4=$(V tile-blockify lanes=4)" --variant "l8=$(V tile-blockify lanes=8)" --variant "l16=$(V tile-blockify lanes=16)" -o $R/lanes > $R/lanes.log 2>&1
grep -A14 "^| case" $R/lanes/seed84.md | cut -c1-900
echo "total $(( $(date +%s) - t0 )) s"
