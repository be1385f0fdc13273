# c91: where the sliced F4 kernel stalls (ncu sections, stall sampling), and the whole llm suite at the default
# on the H200 (eager and irforge), compiled ahead on the machine's cores
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench"
ncu --clock-control none --cache-control all --section WarpStateStats --section SchedulerStats --section Occupancy \
  --section MemoryWorkloadAnalysis --section LaunchStats -k regex:'^k_scaled_dot_product_attention$' -c 1 \
  $B --suite llm --cases F4 --systems eager,irforge --reps 2 --warmup 0 > $R/ncu_f4_sections.txt 2>&1
grep -E "Stall|stall|Warp Cycles|Eligible|Issued Warp|No Eligible|Active Warps|Throughput|Duration|Registers|Shared Memory Config|Achieved" $R/ncu_f4_sections.txt | head -40
echo "ncu $((SECONDS - t0)) s"
timeout 200 $B --suite llm --compile-only --cache /tmp/cache --jobs 14 > $R/compile.log 2>&1; tail -2 $R/compile.log
echo "compiled $((SECONDS - t0)) s"
timeout 330 $B --suite llm --cache /tmp/cache --systems eager,irforge -o $R/llm > $R/llm.log 2>&1
grep -E "^\| (case|[A-Z][0-9])" $R/llm/llm.md | cut -c1-220
echo "all $((SECONDS - t0)) s"
