# c77: where F4's and F6's time goes: each kernel's duration at the GPU's own clocks (ncu --clock-control none,
# caches flushed before each kernel as the harness does), against the harness's time for the pair
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
for c in F4 F6; do
ncu --clock-control none --cache-control all --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active -k regex:'^k_' -c 6 \
  python -m irforge.tools.cli bench --suite llm --cases $c --systems eager,irforge --reps 3 --warmup 1 > $R/ncu_$c.txt 2>&1
grep -E "^  k_|gpu__time_duration|dram__bytes|dram__throughput|warps_active" $R/ncu_$c.txt | head -40
done
