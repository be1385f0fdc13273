# c48: copies addressed over their trip and thread, addresses split by loop depth, flash attention's exponentials
# fused; against 6de14db (the baseline tree, same machine) on the attention and decoder rows.
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
t0=$SECONDS
python -m irforge.tools.cli bench --suite llm --compile-only --cache /tmp/cache_new --jobs 16 > $R/compile.log 2>&1; tail -1 $R/compile.log
echo "compile $((SECONDS - t0)) s"
timeout 230 python -m irforge.tools.cli bench --suite llm --cache /tmp/cache_new --systems eager,irforge -o $R/llm > $R/llm.log 2>&1
grep -E "geomean" $R/llm/llm.md; grep -E "^\| (F[1-6]|D[1-4]|L4|L12) " $R/llm/llm.md | cut -c1-200
echo "llm $((SECONDS - t0)) s"
mkdir -p /tmp/base && tar xzf .dev/base.tgz -C /tmp/base
python -m pip install -q --no-deps --no-build-isolation --target /tmp/basesite /tmp/base > $R/base_install.log 2>&1
(cd /tmp/base && PYTHONPATH=/tmp/basesite:/tmp/site IRFORGE_GIT_REV=6de14db timeout 120 python -m irforge.tools.cli bench --suite llm --cases 'F*,D3' \
  --systems eager,irforge -o $R/llm_base > $R/llm_base.log 2>&1)
grep -E "^\| (F[1-6]|D3) " $R/llm_base/llm.md | cut -c1-200
echo "base $((SECONDS - t0)) s"
timeout 110 python -m irforge.tools.cli bench --suite llm --cases F1,F2,F3 --systems eager,irforge \
  --variant "bk64=$(V tile-chunk-reduce bk=64)" -o $R/bk > $R/bk.log 2>&1
grep -A5 "^| case" $R/bk/llm.md | cut -c1-300
echo "all $((SECONDS - t0)) s"
