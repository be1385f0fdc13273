# c84: where F4's cluster kernel stalls, instruction by instruction (ncu's warp-state sampling over the SASS)
base=$(sed 's/#.*//' pipelines/loop-to-tile.pipeline | tr -d ' \n'); P="torch-to-tensor,tensor-to-loop,$base,tile-to-kernel,kernel-to-cuda"
V() { local p="$P"; while [ $# -gt 0 ]; do p="${p/$1/$1\{$2\}}"; shift 2; done; echo "$p"; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee $R/gpu.txt
t0=$SECONDS
for v in cluster partials; do
  if [ $v = cluster ]; then K='regex:^k_scaled_dot_product_attention$'; else K='regex:_partial$'; fi
  ncu --clock-control none --cache-control all --section SourceCounters --section WarpStateStats -k "$K" -c 1 -o $R/rep_$v \
    python -m irforge.tools.cli bench --suite llm --cases F4 --systems eager,irforge --variant "$v=$(V tile-split-reduce via=$v)" --reps 1 --warmup 0 > $R/ncu_$v.log 2>&1
  ncu -i $R/rep_$v.ncu-rep --page source --csv --print-source sass > $R/sass_$v.csv 2> $R/sass_$v.err
  echo "== $v $(wc -l < $R/sass_$v.csv) lines"; head -2 $R/sass_$v.csv | cut -c1-400
done
python - <<'PY'
import csv, os
R = os.environ["R"]
for v in ("cluster", "partials"):
    rows = list(csv.DictReader(open(f"{R}/sass_{v}.csv")))
    if not rows:
        print(v, "no rows"); continue
    key = next((k for k in rows[0] if "Sampling (All" in k), None)
    if key is None:
        print(v, "columns:", list(rows[0])[:30]); continue
    def n(r):
        try: return float(r[key] or 0)
        except ValueError: return 0.0
    total = sum(n(r) for r in rows)
    print(f"== {v}: {total:.0f} samples")
    for r in sorted(rows, key=n, reverse=True)[:14]:
        print(f"{n(r):7.0f} {100*n(r)/total:5.1f}%  {r.get('Address','')}  {r.get('Source','')[:90]}")
PY
echo "all $((SECONDS - t0)) s"
