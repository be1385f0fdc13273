#!/usr/bin/env bash
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 PATH=/opt/torch/.venv/bin:$PATH
python -m pip install -q --no-index --no-deps --target /tmp/site .dev/lark*.whl 2>/dev/null
python -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=/tmp/res; mkdir -p $R
trap 'cd /tmp && tar czf $OUT/res.tgz res' EXIT
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats --section ComputeWorkloadAnalysis --section SchedulerStats --section InstructionStats"
timeout 150 ncu $S --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio -k regex:'^k_matmul$' -c 1 python -m irforge.tools.cli bench --suite seed84 --cases matmul.QW.q.s128 --systems eager,irforge --reps 3 -o $R/n1 > $R/ncu_matmul_qw_q_s128.txt 2>&1
grep -E "^  k_|Duration|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit (Reg|Shared)|Issue Slots Busy|No Eligible|Compute \(SM\) Throughput|Memory Throughput|bank_conflicts|stalled|Warp Cycles Per Issued|Grid Size|Block Size|highest-utilized" $R/ncu_matmul_qw_q_s128.txt | head -30
