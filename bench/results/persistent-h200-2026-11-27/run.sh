#!/usr/bin/env bash
export IRFORGE_GIT_REV=$(cat .dev/rev)
R=/tmp/res; mkdir -p $R
trap 'cd /tmp && tar czf $OUT/res.tgz res' EXIT
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
CASES="L1,L2,L3,L4,L7,L8,L9,L10,L2.f16,L3.f16,L7.f16,L9.f16,L10.f16"
timeout 400 python -m irforge.tools.cli bench --suite llm --cases "$CASES" --systems eager,irforge --variant "resident_off=$(V tile-persistent blocks=off)" -o $R/ab > $R/ab.log 2>&1
tail -3 $R/ab.log; grep -E "geomean|per family" $R/ab/llm.md; grep -A16 "^| case" $R/ab/llm.md | cut -c1-260
python -m irforge.tools.cli bench --suite llm --compile-only --cache bench/cache --jobs 16 > $R/compile.log 2>&1; tail -2 $R/compile.log
CHUNK_SECONDS=200 PYTHON=python timeout 300 bash bench/run_suites.sh llm $R > $R/llm.log 2>&1; tail -3 $R/llm.log
ls $R; grep -E "geomean|per family" $R/llm*/llm.md 2>/dev/null | head
timeout 120 ncu --section SpeedOfLight --section LaunchStats --section Occupancy -k regex:'^k_linear$' -c 1 python -m irforge.tools.cli bench --suite llm --cases L2 --systems eager,irforge --reps 3 -o $R/n2 > $R/ncu_l2.txt 2>&1
grep -E "Duration|Tensor|Compute \(SM\)|SM Active|Elapsed Cycles|Grid Size|Waves" $R/ncu_l2.txt
