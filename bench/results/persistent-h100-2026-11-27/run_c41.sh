#!/usr/bin/env bash
export IRFORGE_GIT_REV=$(cat .dev/rev)
R=/tmp/res; mkdir -p $R
trap 'cd /tmp && tar czf $OUT/res.tgz res' EXIT
nvidia-smi --query-gpu=name --format=csv,noheader
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
timeout 200 python -m irforge.tools.cli bench --suite llm --cases "L12,L12.f16,F4" --systems eager,irforge \
  --variant "ws_on=$(V tile-warp-specialize producer=on)" --variant "ws_on_s4=$(V tile-warp-specialize producer=on tile-multi-buffer stages=4)" \
  --variant "ws_on_s6=$(V tile-warp-specialize producer=on tile-multi-buffer stages=6)" -o $R/decode_ab > $R/decode_ab.log 2>&1
grep -A8 "^| case" $R/decode_ab/llm.md | cut -c1-400
timeout 200 python -m irforge.tools.cli bench --suite llm --cases "L2,L7,L9,L2.f16,D3,D4" --systems eager,irforge --variant "resident_off=$(V tile-persistent blocks=off)" -o $R/persistent_ab > $R/persistent_ab.log 2>&1
grep -A9 "^| case" $R/persistent_ab/llm.md | cut -c1-330
python -m irforge.tools.cli bench --suite llm --compile-only --cache bench/cache --jobs 16 > $R/compile.log 2>&1; tail -1 $R/compile.log
CHUNK_SECONDS=200 PYTHON=python timeout 260 bash bench/run_suites.sh llm $R > $R/llm.log 2>&1; grep -E "geomean" $R/llm/llm.md
timeout 200 python bench/models_gpu.py run --dir build/models --out $R/models --only tinyllama-bf16 tinyllama-bf16-prefill512 --no-torch-compile > $R/models.log 2>&1
tail -3 $R/models.log | cut -c1-900
