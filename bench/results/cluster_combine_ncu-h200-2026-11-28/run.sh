# c80: why F4's cluster kernel (30.4 us at the GPU's clocks) is slower than its old partial kernel alone (25.9):
# ncu's launch, occupancy, scheduler and warp-state sections for both, and clusters of 2 and 8 against partials
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench"
timeout 150 $B --suite llm --cases F4 --systems eager,irforge -o $R/f4_sizes \
  --variant "partials=$(V tile-split-reduce via=partials)" \
  --variant "c2=$(V tile-split-reduce splits=2)" --variant "p2=$(V tile-split-reduce splits=2,via=partials)" \
  --variant "c8=$(V tile-split-reduce splits=8)" --variant "p8=$(V tile-split-reduce splits=8,via=partials)" > $R/f4_sizes.log 2>&1
grep -E "^\| (case|F)" $R/f4_sizes/llm.md | cut -c1-600; grep -iE "refus|error|Traceback" $R/f4_sizes.log | head -5; echo "sizes $((SECONDS - t0)) s"
for v in cluster partials; do
  if [ $v = partials ]; then K="regex:_partial$|_combine$"; N=2; else K="regex:^k_scaled_dot_product_attention$"; N=1; fi
  ncu --clock-control none --cache-control all --section LaunchStats --section Occupancy --section SchedulerStats --section WarpStateStats --section SpeedOfLight -k "$K" -c $N \
    python -m irforge.tools.cli bench --suite llm --cases F4 --systems eager,irforge --variant "partials=$(V tile-split-reduce via=partials)" --reps 1 --warmup 0 > $R/ncu_$v.txt 2>&1
  echo "== $v"; grep -vE "^==PROF==|^\s*$|----" $R/ncu_$v.txt | grep -E "^  k_|Duration|Cluster|Occupancy|Active|Eligible|Issued|Block Limit|Waves|Stall|Registers|Shared Memory|Throughput|cycles" | head -60
done
echo "ncu $((SECONDS - t0)) s"
