# c92: F6 (and F4) around the sliced default: TMA for every stage (unswizzled), 8 warps of 16 keys, 2 warps of 64,
# a pipeline one chunk deep; two rounds
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench"
for round in 1 2; do
  timeout 200 $B --suite llm --cases F6,F4 --systems eager,irforge -o $R/f6_$round \
    --variant "tma=$(V tile-tma stages=all)" \
    --variant "w8c16=$(V tile-split-reduce 'splits=8 across=warps' tile-chunk-reduce bk=16)" \
    --variant "w2c64=$(V tile-split-reduce 'splits=2 across=warps' tile-chunk-reduce bk=64)" \
    --variant "depth1=$(V tile-pipeline depth=1)" > $R/f6_$round.log 2>&1
  echo "== $round"; grep -E "^\| (case|F|L)" $R/f6_$round/llm.md | cut -c1-400; grep -iE "error|wrong|refus" $R/f6_$round.log | head -5
done
echo "all $((SECONDS - t0)) s"
