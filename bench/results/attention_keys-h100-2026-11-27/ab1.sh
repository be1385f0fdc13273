#!/usr/bin/env bash
R=${OUT_DIR:-results}; mkdir -p $R  # on a GPU machine, irforge installed
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$(date +%s)
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
B() { local out=$1 cases=$2; shift 2; timeout 200 python -m irforge.tools.cli bench --suite llm --cases "$cases" --systems eager,irforge "$@" -o $R/$out > $R/$out.log 2>&1; grep -A12 "^| case" $R/$out/llm.md | cut -c1-600; echo "$out done at $(( $(date +%s) - t0 )) s"; }
B l6 "L6" --variant "y4=$(V tile-blockify threads=4)" --variant "y8=$(V tile-blockify threads=8)" \
  --variant "c128=$(V tile-cooperative-reduce threads=128)" --variant "c256=$(V tile-cooperative-reduce threads=256 tile-blockify threads=1)" \
  --variant "c32y4=$(V tile-cooperative-reduce threads=32 tile-blockify threads=4)" --variant "c32y8=$(V tile-cooperative-reduce threads=32 tile-blockify threads=8)"
B l12 "L12" --variant "bn64=$(V tile-blockify bn=64)" --variant "bn64s4=$(V tile-blockify bn=64 tile-split-reduce splits=4)" \
  --variant "k32s16=$(V tile-chunk-reduce bk=32 tile-split-reduce splits=16)" --variant "r5=$(V tile-multi-buffer stages=5)" \
  --variant "s4=$(V tile-split-reduce splits=4)" --variant "bn64r4=$(V tile-blockify bn=64 tile-multi-buffer stages=4)"
B f2 "F1,F2" --variant "r2=$(V tile-multi-buffer stages=2)" --variant "r2k128=$(V tile-multi-buffer stages=2 tile-chunk-reduce bk=128)"
echo "total $(( $(date +%s) - t0 )) s"
