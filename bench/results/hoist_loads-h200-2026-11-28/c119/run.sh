# c119: kernel-hoist-loads after the wait's placement, weights ahead of it, short loops unrolled (this tree, 098f158)
# against 60ef103 (.dev/base.tgz): TinyLlama's decode step (hoist: 60ef103's build; early: this tree's), both in
# one process, twice; the llm and seed84 cases whose CUDA changes, base/new interleaved twice; `irforge generate`
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
mkdir -p /tmp/old && tar xzf .dev/base.tgz -C /tmp/old
NEW=$PWD
export IRFORGE_CACHE_DIR=$NEW/.dev/mb/cache
for i in 1 2; do
  timeout 150 python bench/decode_sweep.py step hoist=.dev/mb/hoist/tinyllama-bf16.json early=.dev/mb/early3/tinyllama-bf16.json --profile --rounds 7 --json $R/step$i.json > $R/step$i.log 2>&1
  grep -hE "decode step|kernels " $R/step$i.log | cut -c1-150
  echo "step $i $((SECONDS - t0)) s"
done
unset IRFORGE_CACHE_DIR
B="python -m irforge.tools.cli bench --suite llm --cases R1,R2,R3,R4,S1,S2,D1,D2 --systems eager,irforge"
S="python -m irforge.tools.cli bench --suite seed84 --cases rmsnorm.QW.s512,rmsnorm.TL.s512,rmsnorm.TL.s32,softmax.QW.s512,softmax.TL.s512,softmax.TL.s32 --systems eager,irforge"
for i in 1 2; do
  (cd /tmp && PYTHONPATH=/tmp/old:/tmp/site timeout 100 $B -o $R/base$i > $R/base$i.log 2>&1)
  timeout 100 $B -o $R/new$i > $R/new$i.log 2>&1
  (cd /tmp && PYTHONPATH=/tmp/old:/tmp/site timeout 100 $S -o $R/sbase$i > $R/sbase$i.log 2>&1)
  timeout 100 $S -o $R/snew$i > $R/snew$i.log 2>&1
  echo "bench $i $((SECONDS - t0)) s"
done
python - <<'PY'
import json, os
R = os.environ["R"]
def rows(path):
    d = json.load(open(path))
    return {r["id"]: 1e3 * r["systems"]["irforge"]["median_ms"] for r in d["rows"] if r["systems"].get("irforge", {}).get("median_ms")}
for kind, b, n in (("llm", "base", "new"), ("seed84", "sbase", "snew")):
    for i in (1, 2):
        try:
            old, new = rows(f"{R}/{b}{i}/{kind}.json"), rows(f"{R}/{n}{i}/{kind}.json")
        except Exception as e:
            print(kind, i, "no json", e); continue
        print(kind, i, " ".join(f"{c}:{old[c]:.1f}/{new.get(c, float('nan')):.1f}" for c in old))
PY
mkdir -p /tmp/b && cp -r .dev/mb/early3/* /tmp/b/ 2>/dev/null
export IRFORGE_CACHE_DIR=$NEW/.dev/mb/cache
timeout $((580 - (SECONDS - t0))) python bench/models_gpu.py run --dir /tmp/b --out $R/models --only tinyllama-bf16 --no-torch-compile > $R/models.log 2>&1; echo "rc=$?"
grep -E "irforge:|HF eager|limit|logits|FAIL" $R/models.log | cut -c1-200 | head -8
echo "all $((SECONDS - t0)) s"
