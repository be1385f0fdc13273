# c105 (at caf61e4+): L12 (32 x 18944 by 3584 bf16, 81% of the copy bandwidth, 85% asked) with K chunks of 128 or
# 256 (each weight row read in 256- or 512-byte runs, copied by cp.async: TMA's swizzled boxes are 128 bytes wide)
# against the default's 64 (128-byte runs, TMA); twice
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench --suite llm --systems eager,irforge"
for run in 1 2; do
$B --cases L12 -o $R/l_$run \
  --variant "cpasync64=$(V tile-tma stages=none)" \
  --variant "bk128s4=$(V tile-chunk-reduce bk=128 tile-split-reduce splits=4)" \
  --variant "bk128s4n64=$(V tile-chunk-reduce bk=128 tile-split-reduce splits=4 tile-blockify bn=64)" \
  --variant "bk256s2n64=$(V tile-chunk-reduce bk=256 tile-split-reduce splits=2 tile-blockify bn=64)" \
  --variant "bk128s2n32=$(V tile-chunk-reduce bk=128 tile-split-reduce splits=2 tile-blockify bn=32)" \
  --variant "bk256s2n32=$(V tile-chunk-reduce bk=256 tile-split-reduce splits=2 tile-blockify bn=32)" \
  --variant "bk128s4n64r4=$(V tile-chunk-reduce bk=128 tile-split-reduce splits=4 tile-blockify bn=64 tile-multi-buffer stages=4)" > $R/l_$run.log 2>&1
python - $R/l_$run/llm.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    for k, s in r["systems"].items():
        print(f"{r['id']:6} {k:14} {s.get('status')} {s.get('median_ms', 0) * 1e3:8.1f} us  {str(s.get('error', ''))[:120]}")
PY
echo "run $run at $((SECONDS - t0)) s"
done
