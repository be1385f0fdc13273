# Schedule variants of the llm cases short of their goals on the H100 (L4 >= 0.8x cuBLAS, L12 >= 85% and F4 >= 80%
# of the copy bandwidth): split counts, tile widths, the mma.sync atom, rings
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
B="python -m irforge.tools.cli bench --suite llm --systems eager,irforge"
$B --cases L4,L4.f16 -o $R/l4 \
  --variant "sp2=$(V tile-split-reduce splits=2)" --variant "sp8=$(V tile-split-reduce splits=8)" \
  --variant "bn128=$(V tile-blockify bn=128)" --variant "mma=$(V tile-tensorize atom=mma)" \
  --variant "ring3=$(V tile-multi-buffer stages=3)" 2>&1 | grep -v Warn | tail -12
$B --cases L12 -o $R/l12 \
  --variant "sp4=$(V tile-split-reduce splits=4)" --variant "sp16=$(V tile-split-reduce splits=16)" \
  --variant "bn64=$(V tile-blockify bn=64)" --variant "bn256=$(V tile-blockify bn=256)" \
  --variant "ring6=$(V tile-multi-buffer stages=6)" 2>&1 | grep -v Warn | tail -12
$B --cases F4,F6 -o $R/f4 \
  --variant "sp2=$(V tile-split-reduce splits=2)" --variant "sp8=$(V tile-split-reduce splits=8)" \
  --variant "ring4=$(V tile-multi-buffer stages=4)" 2>&1 | grep -v Warn | tail -12
