#!/usr/bin/env bash
# Prefill attention on mma atoms (tile-tensorize's attention layout, passes/tile_to_kernel/flash.py) on an
# H100/H200, about 2 minutes:
# 1. the llm suite's F1-F3 against PyTorch's SDPA, with the block shapes the heuristic weighs: the default, 16 query
#    rows a warp in blocks of 64 (`rows16`) and 8 warps of 32 rows (`warps8`): OUT/ab/;
# 2. ncu on F3's kernel (its shape in a program of its own): the warps' stall reasons per issued instruction, the
#    pipes' use and the occupancy: OUT/ncu_f3.txt.
#
#   bench/attention_mma_ab.sh OUT_DIR
set -euo pipefail
out=${1:?usage: bench/attention_mma_ab.sh OUT_DIR}
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
mkdir -p "$out"
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n')
variant() { echo "torch-to-tensor,tensor-to-loop,$(sed "s/tile-blockify/tile-blockify{$1}/" <<<"$base"),tile-to-kernel,kernel-to-cuda"; }
"$py" -m irforge.tools.cli bench --suite llm --cases F1,F2,F3 --systems eager,irforge \
  --variant "rows16=$(variant 'bm=64 threads=128')" --variant "warps8=$(variant 'bm=256 threads=256')" -o "$out/ab"
program=$(mktemp --suffix .py)
cat >"$program" <<'PY'
import torch
import torch.nn.functional as F


class M(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


model = M()
example_inputs = tuple(torch.randn(1, h, 2048, 128, dtype=torch.bfloat16) for h in (28, 4, 4))
PY
metrics=regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio
metrics+=,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active
metrics+=,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active
metrics+=,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,gpu__time_duration.sum
ncu --metrics "$metrics" --section Occupancy --section LaunchStats -k regex:k_scaled -c 1 \
  "$py" -m irforge.tools.cli run "$program" >"$out/ncu_f3.txt" 2>&1
