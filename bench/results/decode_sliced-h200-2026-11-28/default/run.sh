# c90: the sliced decode attention as the default (F4, F6: 4 warps a block, rings of 3) against the split over
# blocks (the previous default: across=blocks), three rounds; ncu of both F4 kernels; the GPU tests
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench"
for round in 1 2 3; do
  timeout 150 $B --suite llm --cases F4,F5,F6 --systems eager,irforge -o $R/sliced$round \
    --variant "blocks=$(V tile-split-reduce across=blocks)" > $R/sliced$round.log 2>&1
  echo "== $round"; grep -E "^\| (case|F|L)" $R/sliced$round/llm.md | cut -c1-400; grep -iE "error|wrong|refus" $R/sliced$round.log | head -5
done
echo "bench $((SECONDS - t0)) s"
for c in F4 F6; do
ncu --clock-control none --cache-control all --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed -k regex:'^k_scaled_dot_product_attention' -c 6 \
  $B --suite llm --cases $c --systems eager,irforge --variant "blocks=$(V tile-split-reduce across=blocks)" --reps 2 --warmup 0 > $R/ncu_$c.txt 2>&1
grep -vE "^==PROF==|^\s*$|----" $R/ncu_$c.txt | grep -E "^  k_|gpu__time|dram__" | head -30
done
echo "ncu $((SECONDS - t0)) s"
timeout 300 python -m pytest -p no:cacheprovider -x tests/test_gpu.py 2>&1 | tail -5
echo "all $((SECONDS - t0)) s"
