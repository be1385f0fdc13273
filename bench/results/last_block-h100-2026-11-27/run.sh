# last-block A/B: the default (split reductions folded by the last block of each tile) against via=partials
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
python .dev/c44_repeat.py L4 L12 F4 F6 2>&1 | grep -v Warning | tee $R/repeat.txt
CASES=L1,L4,L5,L6,L11,L12,L13,L14,F4,F5,F6,D1,D2
python -m irforge.tools.cli bench --suite llm --cases $CASES --systems eager,irforge \
  --variant "partials=$(V tile-split-reduce via=partials)" -o $R/ab 2>&1 | tail -40
python -m irforge.tools.cli bench --suite llm --cases L4,L12,F4,F6,D1 --systems eager,irforge \
  --variant "partials=$(V tile-split-reduce via=partials)" -o $R/ab2 2>&1 | tail -25
