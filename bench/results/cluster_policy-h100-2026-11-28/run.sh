# c81: (1) the launch-bounds rule of the spill fix (kernels whose loop carries and loads more than half a thread's
# full-occupancy registers lose the bare __launch_bounds__) on the 15 seed84 kernels it changes, against the tree
# before it (same machine, interleaved); (2) an experiment: F4's cluster kernel (via=cluster) under the cluster
# scheduling policies LOAD_BALANCING and SPREAD against the default and against via=partials.
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
B="python -m irforge.tools.cli bench"
CASES='matmul.TL.kv.s32,matmul.TL.kv.s128,matmul.QW.kv.s32,sdpa.*,naive_attn.*'
BR=$(cat .dev/base_rev); mkdir -p /tmp/base && tar xzf .dev/base.tgz -C /tmp/base
python -m pip install -q --no-deps --no-build-isolation --target /tmp/basesite /tmp/base > $R/base_install.log 2>&1
for round in 1 2; do
  timeout 150 $B --suite seed84 --cases "$CASES" --systems eager,irforge -o $R/seed_new$round > $R/seed_new$round.log 2>&1
  (cd /tmp/base && PYTHONPATH=/tmp/basesite:/tmp/site IRFORGE_GIT_REV=$BR timeout 150 python -m irforge.tools.cli bench --suite seed84 --cases "$CASES" \
    --systems eager,irforge -o $R/seed_base$round > $R/seed_base$round.log 2>&1)
  echo "round $round $((SECONDS - t0)) s"
done
python - <<'PY'
import json, os
R = os.environ["R"]
def load(p):
    d = json.load(open(p))
    return {r["id"]: r["systems"]["irforge"].get("median_ms") for r in d["rows"]}
for k in (1, 2):
    new, base = load(f"{R}/seed_new{k}/seed84.json"), load(f"{R}/seed_base{k}/seed84.json")
    for c in sorted(new):
        print(k, c, f"new {new[c]*1e3:.1f} us  base {base[c]*1e3:.1f} us  new/base {new[c]/base[c]:.3f}")
PY
python .dev/policy_patch.py
for pol in "" LOAD_BALANCING SPREAD; do
  IRFORGE_CLUSTER_POLICY=$pol timeout 100 $B --suite llm --cases F4,F6,L12 --systems eager,irforge -o $R/policy_${pol:-default} \
    --variant "cluster=$(V tile-split-reduce via=cluster)" > $R/policy_${pol:-default}.log 2>&1
  echo "== policy ${pol:-default}"; grep -E "^\| (case|F|L)" $R/policy_${pol:-default}/llm.md | cut -c1-300
done
echo "all $((SECONDS - t0)) s"
