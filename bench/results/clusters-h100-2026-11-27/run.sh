# clusters A/B: split reductions folded by a thread block cluster (the default) against a second kernel (via=partials)
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
python .dev/c46_repeat.py L4 L12 F4 F6 2>&1 | grep -v Warning | tee $R/repeat.txt
python -m irforge.tools.cli bench --suite llm --cases L4,L12,F4,F6,L4.f16,L12.f16,D1,D2 --systems eager,irforge \
  --variant "partials=$(V tile-split-reduce via=partials)" -o $R/ab 2>&1 | grep -v Warn | tail -16
