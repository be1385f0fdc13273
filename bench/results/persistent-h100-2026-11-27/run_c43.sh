#!/usr/bin/env bash
export IRFORGE_GIT_REV=$(cat .dev/rev)
R=/tmp/res; mkdir -p $R
trap 'cd /tmp && tar czf $OUT/res.tgz res' EXIT
nvidia-smi --query-gpu=name --format=csv,noheader
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
timeout 300 python -m irforge.tools.cli bench --suite llm --cases "L2,L7,L9,L2.f16,L7.f16,D3,D4,L1,L4" --systems eager,irforge --variant "resident_off=$(V tile-persistent blocks=off)" --variant "resident_on=$(V tile-persistent blocks=on)" -o $R/ab8 > $R/ab8.log 2>&1
grep -E "^\[" $R/ab8.log
