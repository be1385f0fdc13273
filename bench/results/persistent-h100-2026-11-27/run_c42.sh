#!/usr/bin/env bash
export IRFORGE_GIT_REV=$(cat .dev/rev)
R=/tmp/res; mkdir -p $R
trap 'cd /tmp && tar czf $OUT/res.tgz res' EXIT
nvidia-smi --query-gpu=name --format=csv,noheader
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
timeout 200 ncu --section SpeedOfLight -c 8 -k regex:'^k_(linear|linear_2|mul_linear|add_linear)$' python -m irforge.tools.cli bench --suite llm --cases D4 --systems eager,irforge --variant "resident_off=$(V tile-persistent blocks=off)" --reps 2 -o $R/n_d4 > $R/ncu_d4.txt 2>&1
grep -E "^  k_|Duration|Compute \(SM\)" $R/ncu_d4.txt | paste - - - | awk '{print $1, $2, $(NF-4), $NF}'
timeout 120 python -m irforge.tools.cli bench --suite llm --cases "D3,D4" --systems eager,irforge --variant "resident_off=$(V tile-persistent blocks=off)" -o $R/d_ab > $R/d_ab.log 2>&1
grep -E "^\[" $R/d_ab.log
