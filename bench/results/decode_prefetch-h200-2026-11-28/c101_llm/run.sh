# c101: the llm suite at the default against the default with kernel-dependent-launch{prefetch-l2-share=0.5
# prefetch-when=idle} (a candidate default: 1.5-2.1% off TinyLlama's decode step in c98/c99), twice
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n')
P="torch-to-tensor,tensor-to-loop,$base,lower-to-kernel,kernel-dependent-launch{prefetch-l2-share=0.5 prefetch-when=idle},cse,dce,kernel-to-cuda"
B="python -m irforge.tools.cli bench"
timeout 240 $B --suite llm --compile-only --cache /tmp/cache --jobs 14 --variant "idle=$P" > $R/compile.log 2>&1; tail -1 $R/compile.log
echo "compiled $((SECONDS - t0)) s"
for i in 1 2; do
  timeout 150 $B --suite llm --cache /tmp/cache --systems eager,irforge --variant "idle=$P" -o $R/llm$i > $R/llm$i.log 2>&1
  echo "== run $i $((SECONDS - t0)) s"; grep -E "geomean" $R/llm$i/llm.md | cut -c1-200
done
python - <<'PY'
import json, statistics
for i in (1, 2):
    d = json.load(open(f"/tmp/res/llm{i}/llm.json"))
    rows = d["rows"]
    out = []
    for r in rows:
        s = r["systems"]
        a, b = s.get("irforge", {}).get("median_ms"), s.get("idle", {}).get("median_ms")
        if a and b:
            out.append((b / a, r["id"]))
        elif "idle" in s and s["idle"].get("status") != "ok":
            print("  idle failed on", r["id"], s["idle"].get("status"), str(s["idle"].get("error", ""))[:150])
    out.sort()
    print(f"run {i}: idle/default geomean {statistics.geometric_mean([x for x, _ in out]):.4f}")
    print("  best", [(c, round(x, 3)) for x, c in out[:6]])
    print("  worst", [(c, round(x, 3)) for x, c in out[-6:]])
PY
echo "all $((SECONDS - t0)) s"
