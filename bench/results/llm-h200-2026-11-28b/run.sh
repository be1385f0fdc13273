# c96: the default with F6's sliced slabs swizzled: F6 three rounds against the previous choice (the pad:
# tile-pad-smem pad=8 with no swizzle), the whole llm suite once, the GPU tests
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench"
for round in 1 2 3; do
  timeout 150 $B --suite llm --cases F6 --systems eager,irforge -o $R/final$round \
    --variant "padded=$(V tile-swizzle-smem swizzle=0,0,0 tile-pad-smem pad=8)" > $R/final$round.log 2>&1
  echo "== $round"; grep -E "^\| (case|F|L)" $R/final$round/llm.md | cut -c1-330; grep -iE "error|wrong|refus" $R/final$round.log | head -5
done
echo "bench $((SECONDS - t0)) s"
timeout 200 $B --suite llm --compile-only --cache /tmp/cache --jobs 14 > $R/compile.log 2>&1; tail -1 $R/compile.log
timeout 200 $B --suite llm --cache /tmp/cache --systems eager,irforge -o $R/llm > $R/llm.log 2>&1
grep -E "geomean|^\| (F|L12|L5)" $R/llm/llm.md | cut -c1-200
echo "llm $((SECONDS - t0)) s"
timeout 200 python -m pytest -p no:cacheprovider -x tests/test_gpu.py 2>&1 | tail -2
echo "all $((SECONDS - t0)) s"
