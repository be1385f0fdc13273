# c95: the sliced decode kernels' copies: F4 by the threads (cp.async) instead of TMA; F6's slabs swizzled instead of
# padded (B,M,S = 3,4,3 and 3,3,4); two rounds
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench"
for round in 1 2; do
  timeout 200 $B --suite llm --cases F6,F4 --systems eager,irforge -o $R/copies$round \
    --variant "cpasync=$(V tile-tma stages=none)" \
    --variant "swz343=$(V tile-pad-smem pad=0 tile-swizzle-smem swizzle=3,4,3)" \
    --variant "swz334=$(V tile-pad-smem pad=0 tile-swizzle-smem swizzle=3,3,4)" > $R/copies$round.log 2>&1
  echo "== $round"; grep -E "^\| (case|F|L)" $R/copies$round/llm.md | cut -c1-330; grep -iE "error|wrong|refus" $R/copies$round.log | head -5
done
echo "all $((SECONDS - t0)) s"
