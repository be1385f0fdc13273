# c106 (at HEAD): ncu of the two worst memory-bound cases' kernels at the default schedules on an H200: F4 (decode
# attention sliced among 4 warps, one kernel) and L12 (split-K partial product and its combine)
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
S="--section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats"
for c in F4 L12; do
  timeout 200 ncu $S -c 6 -k regex:'^k_' python -m irforge.tools.cli bench --suite llm --cases $c --systems eager,irforge --reps 2 --warmup 1 > $R/ncu_$c.txt 2>&1
  echo "== $c $((SECONDS - t0)) s"
  grep -E "^  k_|Duration|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Waves Per SM|Grid Size|Block Size|Eligible Warps|No Eligible|Issued Warp|Stall|Dynamic Shared|Static Shared|L1TEX|Long Scoreboard" $R/ncu_$c.txt | head -60
done
