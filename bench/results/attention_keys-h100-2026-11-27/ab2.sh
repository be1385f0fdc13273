#!/usr/bin/env bash
R=${OUT_DIR:-results}; mkdir -p $R  # on a GPU machine, irforge installed
t0=$(date +%s)
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
B() { local out=$1 cases=$2; shift 2; timeout 200 python -m irforge.tools.cli bench --suite llm --cases "$cases" --systems eager,irforge "$@" -o $R/$out > $R/$out.log 2>&1; grep -A12 "^| case" $R/$out/llm.md | cut -c1-700; echo "$out done at $(( $(date +%s) - t0 )) s"; }
B f2b "F1,F2" --variant "k128=$(V tile-chunk-reduce bk=128)" --variant "r2k128=$(V tile-multi-buffer stages=2 tile-chunk-reduce bk=128)" \
  --variant "r3k128=$(V tile-multi-buffer stages=3 tile-chunk-reduce bk=128)" --variant "r2=$(V tile-multi-buffer stages=2)"
B l12b "L12" --variant "k128s4=$(V tile-chunk-reduce bk=128 tile-split-reduce splits=4)" \
  --variant "k128bn64s4=$(V tile-chunk-reduce bk=128 tile-blockify bn=64 tile-split-reduce splits=4)" \
  --variant "k128bn64s8=$(V tile-chunk-reduce bk=128 tile-blockify bn=64 tile-split-reduce splits=2)"
B f3b "F3" --variant "r2=$(V tile-multi-buffer stages=2)" --variant "r4=$(V tile-multi-buffer stages=4)"
timeout 150 ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy -k regex:k_linear -c 2 \
  python -m irforge.tools.cli bench --suite llm --cases L6,L11 --systems irforge --reps 3 -o $R/ncu_l6 > $R/ncu_l6.txt 2>&1
grep -E "k_linear|Duration|DRAM Throughput|Achieved Occ|Mem Busy|Max Bandwidth|L2 Hit|Registers" $R/ncu_l6.txt
echo "total $(( $(date +%s) - t0 )) s"
