#!/usr/bin/env bash
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 PATH=/opt/torch/.venv/bin:$PATH
python -m pip install -q --no-index --no-deps --target /tmp/site .dev/lark*.whl 2>/dev/null
python -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null 2>&1
export IRFORGE_GIT_REV=$(cat .dev/rev)
R=/tmp/res; mkdir -p $R
trap 'cd /tmp && tar czf $OUT/res.tgz res' EXIT
t0=$(date +%s)
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
timeout 400 python -m irforge.tools.cli bench --suite seed84 --cases "sdpa.*,naive_attn.*" --systems eager,irforge \
  --variant "l4=$(V tile-blockify lanes=4)" --variant "l8=$(V tile-blockify lanes=8)" --variant "l16=$(V tile-blockify lanes=16)" -o $R/lanes > $R/lanes.log 2>&1
grep -A14 "^| case" $R/lanes/seed84.md | cut -c1-900
echo "total $(( $(date +%s) - t0 )) s"
