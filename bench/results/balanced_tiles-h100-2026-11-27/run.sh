# c57: L12 (and twins) with column tiles whose split blocks balance over the multiprocessors: bn=112 (32 x 8 = 256
# blocks) and bn=224 (16 x 8 = 128) against the default 128 (28 x 8 = 224: 92 SMs stream two blocks, 40 one)
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench --suite llm --systems eager,irforge"
for run in 1 2; do
$B --cases L12,L12.f16,L14 -o $R/l12_$run \
  --variant "bn112=$(V tile-blockify bn=112)" --variant "bn224=$(V tile-blockify bn=224)" \
  --variant "bn112s4=$(V tile-blockify bn=112 tile-split-reduce splits=4)" \
  --variant "bn224s4=$(V tile-blockify bn=224 tile-split-reduce splits=4)" > $R/l12_$run.log 2>&1
grep -E "^\| L1" $R/l12_$run/llm.md | cut -c1-200; echo "run $run at $((SECONDS - t0)) s"
done
