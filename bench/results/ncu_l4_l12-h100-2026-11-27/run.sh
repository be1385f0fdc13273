# ncu of L4's two kernels (the split-K partial product and the combine) and L12's, at the default schedule
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
for c in L4 L12; do
  ncu --section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis -c 4 -k regex:'^k_linear' \
    python -m irforge.tools.cli bench --suite llm --cases $c --systems eager,irforge --reps 2 --warmup 1 > $R/ncu_$c.txt 2>&1
  grep -E "k_linear|Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Waves Per SM|Grid Size|Block Limit" $R/ncu_$c.txt | head -40
done
