# c108: L12 (32 x 18944 by 3584 bf16) with more warps a multiprocessor (ncu: 78% of cycles with no eligible warp,
# 1.7 blocks of 4 warps a multiprocessor): 8 warps a block, or tiles of 64 columns (448 blocks); twice
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench --suite llm --systems eager,irforge"
for run in 1 2; do
$B --cases L12 -o $R/l_$run \
  --variant "t256=$(V tile-blockify threads=256)" \
  --variant "t256r4=$(V tile-blockify threads=256 tile-multi-buffer stages=4)" \
  --variant "bn64=$(V tile-blockify bn=64)" \
  --variant "bn64s4=$(V tile-blockify bn=64 tile-split-reduce splits=4)" \
  --variant "bn64r4=$(V tile-blockify bn=64 tile-multi-buffer stages=4)" > $R/l_$run.log 2>&1
python - $R/l_$run/llm.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    for k, s in r["systems"].items():
        print(f"{r['id']:6} {k:10} {s.get('status')} {s.get('median_ms', 0) * 1e3:8.1f} us  {str(s.get('error', ''))[:120]}")
PY
echo "run $run at $((SECONDS - t0)) s"
done
