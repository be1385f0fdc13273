# c49: ncu of F3's kernel (stall reasons per SASS instruction) at the committed tree; the baseline tree's F rows
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
cat > /tmp/f3.py <<'PY'
import torch
import torch.nn.functional as F


class M(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


model = M()
example_inputs = tuple(torch.randn(1, h, 2048, 128, dtype=torch.bfloat16) for h in (28, 4, 4))
PY
sed 's/(28, 4, 4)/(32, 4, 4)/; s/2048, 128/2048, 64/' /tmp/f3.py > /tmp/f2.py
for c in f3 f2; do
  timeout 150 ncu -o /tmp/ncu_$c --section WarpStateStats --section SourceCounters --section SchedulerStats --section Occupancy \
    --section LaunchStats --section ComputeWorkloadAnalysis --section SpeedOfLight -k regex:k_scaled -c 1 \
    python -m irforge.tools.cli run /tmp/$c.py > $R/ncu_$c.log 2>&1
  ncu -i /tmp/ncu_$c.ncu-rep --page details > $R/ncu_$c.txt 2>&1
  ncu -i /tmp/ncu_$c.ncu-rep --page source --csv --print-source sass > $R/ncu_${c}_sass.csv 2>&1
  grep -E "Duration|Issue Slots Busy|Executed Ipc A|Registers Per|Theoretical Occ|Achieved Occ|Warp Cycles Per Issued|No Eligible" $R/ncu_$c.txt | head -12
done
echo "ncu $((SECONDS - t0)) s"
mkdir -p /tmp/base && tar xzf .dev/base.tgz -C /tmp/base
python -m pip install -q --no-deps --no-build-isolation --target /tmp/basesite /tmp/base > $R/base_install.log 2>&1
(cd /tmp && PYTHONPATH=/tmp/basesite:/tmp/site IRFORGE_GIT_REV=6de14db timeout 100 python -m irforge.tools.cli bench --suite llm --cases 'F1,F2,F3,D3' \
  --systems eager,irforge -o $R/llm_base > $R/llm_base.log 2>&1)
grep -E "^\| (F[1-6]|D3) " $R/llm_base/llm.md | cut -c1-200
echo "all $((SECONDS - t0)) s"
