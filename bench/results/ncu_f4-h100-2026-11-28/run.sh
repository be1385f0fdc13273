# c67: ncu of F4's kernels (decode attention on the mma atoms' top halves, keys split over blocks, and the
# combine): where its 76% of the copy bandwidth goes
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
ncu --section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats -c 6 -k regex:'^k_' \
  python -m irforge.tools.cli bench --suite llm --cases F4 --systems eager,irforge --reps 2 --warmup 1 > $R/ncu_f4.txt 2>&1
grep -E "^  k_|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Waves Per SM|Grid Size|Block Size|Block Limit|Stall|Issued Ipc|Eligible Warps|No Eligible|Dynamic Shared|Static Shared" $R/ncu_f4.txt | head -80
