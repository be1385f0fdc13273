# c88: decode attention sliced among a block's warps (tile-split-reduce across=warps): one kernel, no combine kernel.
# F4, F5, F6 default (split over blocks via partials) against 2, 4, 8 warps; chunk variants; two rounds; ncu of F4 w4
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench"
for round in 1 2; do
  timeout 200 $B --suite llm --cases F4,F6,F5 --systems eager,irforge -o $R/warps$round \
    --variant "w2=$(V tile-split-reduce 'splits=2 across=warps')" \
    --variant "w4=$(V tile-split-reduce 'splits=4 across=warps')" \
    --variant "w8=$(V tile-split-reduce 'splits=8 across=warps')" \
    --variant "w4c32=$(V tile-split-reduce 'splits=4 across=warps' tile-chunk-reduce bk=32)" \
    --variant "w8c32=$(V tile-split-reduce 'splits=8 across=warps' tile-chunk-reduce bk=32)" \
    > $R/warps$round.log 2>&1
  echo "== $round"; grep -E "^\| (case|F|L)" $R/warps$round/llm.md | cut -c1-400; grep -iE "error|refus|fail|mismatch" $R/warps$round.log | head -5
done
echo "bench $((SECONDS - t0)) s"
ncu --clock-control none --cache-control all --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active -k regex:'^k_scaled_dot_product_attention$' -c 2 \
  $B --suite llm --cases F4 --systems eager,irforge --variant "w4=$(V tile-split-reduce 'splits=4 across=warps')" --reps 2 --warmup 0 > $R/ncu_w4.txt 2>&1
grep -vE "^==PROF==|^\s*$|----" $R/ncu_w4.txt | grep -E "^  k_|gpu__time|dram__|warps_active" | head -30
echo "all $((SECONDS - t0)) s"
