"""Summarize an ncu CSV (--csv --page raw): per kernel name, count, mean duration, DRAM bytes read."""

import collections
import csv
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
units, rows = rows[0], rows[1:]
f = lambda s: float(s.replace(",", ""))
ts = {"ns": 1e-3, "nsecond": 1e-3, "us": 1, "usecond": 1, "ms": 1e3, "msecond": 1e3}[units["gpu__time_duration.sum"]]
bs = {"byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1, "Gbyte": 1e3}[units["dram__bytes_read.sum"]]
agg = collections.defaultdict(list)
for r in rows:
    agg[r["Kernel Name"]].append(r)
tot = 0
print(f"{'kernel':45s} {'n':>4s} {'grid':>6s} {'blk':>5s} {'regs':>4s} {'us':>7s} {'MB':>7s} {'TB/s':>6s} {'occ%':>5s}")
for name, rs in sorted(agg.items(), key=lambda kv: -sum(f(r["gpu__time_duration.sum"]) for r in kv[1])):
    us = sum(f(r["gpu__time_duration.sum"]) for r in rs) / len(rs) * ts
    mb = sum(f(r["dram__bytes_read.sum"]) for r in rs) / len(rs) * bs
    tot += us * len(rs)
    r = rs[0]
    occ = f(r["sm__warps_active.avg.pct_of_peak_sustained_active"])
    grid, blk, regs = r["launch__grid_size"], r["launch__block_size"], r["launch__registers_per_thread"]
    print(f"{name[:45]:45s} {len(rs):4d} {grid:>6s} {blk:>5s} {regs:>4s} {us:7.2f} {mb:7.2f} {mb / us:6.2f} {occ:5.1f}")
print(f"total {tot:.1f} us over {len(rows)} kernels")
