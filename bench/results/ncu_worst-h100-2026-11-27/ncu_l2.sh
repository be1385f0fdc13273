#!/usr/bin/env bash
R=${OUT_DIR:-results}; mkdir -p $R  # on a GPU machine, irforge installed
t0=$(date +%s)
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats --section ComputeWorkloadAnalysis --section SchedulerStats --section InstructionStats"
timeout 150 ncu $S -k regex:k_matmul -c 1 python -m irforge.tools.cli bench --suite seed84 --cases matmul.QW.q.s128 --systems eager,irforge --reps 3 -o $R/n1 > $R/ncu_matmul_qw_q_s128.txt 2>&1
echo "1 at $(( $(date +%s) - t0 )) s"
timeout 150 ncu $S --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum -k regex:k_linear -c 1 python -m irforge.tools.cli bench --suite llm --cases L2 --systems eager,irforge --reps 3 -o $R/n2 > $R/ncu_l2.txt 2>&1
echo "2 at $(( $(date +%s) - t0 )) s"
for f in $R/ncu_*.txt; do echo "== $f"; grep -E "Duration|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Issue Slots Busy|No Eligible|Compute \(SM\) Throughput|Memory Throughput|Stall|bank_conflicts|Warp Cycles Per Issued|Shared Memory Configuration|Dynamic Shared" $f | head -30; done
