#!/usr/bin/env bash
R=${OUT_DIR:-results}; mkdir -p $R  # on a GPU machine, irforge installed
t0=$(date +%s)
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
B() { local out=$1 cases=$2; shift 2; timeout 250 python -m irforge.tools.cli bench --suite llm --cases "$cases" --systems eager,irforge "$@" -o $R/$out > $R/$out.log 2>&1; grep -A8 "^| case" $R/$out/llm.md | cut -c1-900; echo "$out done at $(( $(date +%s) - t0 )) s"; }
B wide "L2,L7,L9,L3" --variant "bn128=$(V tile-blockify bn=128)" --variant "bn256=$(V tile-blockify bn=256)" --variant "r3=$(V tile-multi-buffer stages=3)"
B dec "F4,F6" --variant "k128=$(V tile-chunk-reduce bk=128)" --variant "k32=$(V tile-chunk-reduce bk=32)"
echo "total $(( $(date +%s) - t0 )) s"
