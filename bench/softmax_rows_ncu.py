"""seed84's softmax over (1, h, 32, 32) rows (f32): eager's kernel and irforge's, each launched `--launches` times,
for Nsight Compute to time both sides' kernels alone (issue 10: the s32 rows measured 0.95x-1.12x of eager in the
suite, within the run-to-run noise of ~0.3 us; this asks the kernels themselves).

    ncu --set full -k regex:softmax -o OUT/softmax_rows python bench/softmax_rows_ncu.py --labels OUT/labels
    ncu -i OUT/softmax_rows.ncu-rep --page raw --csv > OUT/raw.csv
    python bench/softmax_rows_ncu.py --summarize OUT/raw.csv --labels OUT/labels

The programs are the suite's cases (`softmax.TL.s32`: 32 heads, `softmax.QW.s32`: 28), built by the suite's own
systems (irforge through the default pipeline, or `--pipeline`, and any `--variant NAME=PIPELINE`), each checked
against eager before it is launched.
ncu flushes the caches before each profiled kernel (its default `--cache-control all`) and locks the clocks to base
(`--clock-control base`), the same for both sides. `--summarize` prints, per kernel and shape, the median duration
and the instruction and stall picture of the launches.
"""

from __future__ import annotations

import argparse
import collections
import csv
import statistics
import sys

CASES = ("softmax.TL.s32", "softmax.QW.s32")
METRICS = {
    "gpu__time_duration.sum": "duration",
    "gpc__cycles_elapsed.max": "GPC cycles elapsed (max)",
    "sm__cycles_active.avg": "SM cycles active (avg)",
    "sm__cycles_active.max": "SM cycles active (max)",
    "sm__cycles_elapsed.max": "SM cycles elapsed (max)",
    "smsp__inst_executed.sum": "warp instructions",
    "smsp__warps_launched.sum": "warps launched",
    "launch__registers_per_thread": "registers a thread",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy %",
    "dram__bytes_read.sum": "DRAM read",
    "dram__bytes_write.sum": "DRAM written",
}
# WarpStateStats' breakdown: warps stalled for each reason per issued instruction (cycles between issues)
STALL, PER_ISSUE = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"


def launch(launches: int, systems: dict[str, str | None], labels: str | None, cache: str | None) -> None:
    """Each case on each system (eager: None; else an irforge pipeline): one checked call, then `launches` more;
    the systems' kernels in that order, so ncu's launch IDs map back to them (`labels`: a file, one a launch)."""
    import torch

    from irforge.bench.case import select, suite
    from irforge.bench.compile_cache import CompileCache, irforge_system
    from irforge.bench.harness import compare

    order = []
    for case in select(suite("seed84"), ",".join(CASES)):
        program = case.program("cuda")
        xs = case.make_inputs("cuda")
        ref = program(*xs)
        order.append(f"eager {case.id}")
        for name, pipeline in systems.items():
            built = irforge_system(name, pipeline, CompileCache(cache) if cache else None) if pipeline else None
            fn = built.build(case, program) if built else program
            if pipeline is not None:
                ok, _, why = compare(fn(*xs), ref, case.tol)
                assert ok, f"{case.id} {name}: {why}"
                order.append(f"{name} {case.id}")
            torch.cuda.synchronize()
            for _ in range(launches):
                fn(*xs)
            torch.cuda.synchronize()
            order += [f"{name} {case.id}"] * launches
        print(f"{case.id} {case.shapes()}: {launches} launches each of {', '.join(systems)}")
    if labels:
        with open(labels, "w") as f:
            f.write("\n".join(order) + "\n")


def summarize(path: str, labels: str | None) -> None:
    rows = list(csv.DictReader(open(path)))
    units, rows = rows[0], sorted(rows[1:], key=lambda r: int(r["ID"]))
    names = open(labels).read().split("\n")[: len(rows)] if labels else None
    groups = collections.defaultdict(list)
    for i, r in enumerate(rows):
        side = "irforge" if r["Kernel Name"].startswith("k_") else "eager"
        groups[names[i] if names else f"{side} grid {r['Grid Size']}"].append(r)

    def num(r, k):
        return float(r[k].replace(",", "")) if r.get(k) not in (None, "", "n/a") else float("nan")

    for label, rs in groups.items():
        r0 = rs[0]
        print(
            f"== {label}: {r0['Kernel Name'][:60]} grid {r0['Grid Size']} block {r0['Block Size']} ({len(rs)} launches)"
        )
        for k, what in METRICS.items():
            if k in units:
                vals = [num(r, k) for r in rs]
                print(f"  {what:28s} {statistics.median(vals):10.2f} {units[k]:8s} (min {min(vals):.2f})")
        stalls = sorted(
            ((statistics.median(num(r, k) for r in rs), k.removeprefix(STALL).removesuffix(PER_ISSUE)) for k in units
             if k.startswith(STALL) and k.endswith(PER_ISSUE) and "not_issued" not in k),
            reverse=True,
        )  # fmt: skip
        print("  stall cycles per issued instruction: " + ", ".join(f"{n} {v:.1f}" for v, n in stalls[:8] if v > 0))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--launches", type=int, default=4)
    p.add_argument("--pipeline", default="torch-to-cuda", help="irforge's pipeline")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=PIPELINE", help="also these (repeatable)")
    p.add_argument("--labels", metavar="PATH", help="the system and case of each kernel launched, in order")
    p.add_argument("--cache", metavar="DIR", help="compiled programs (`irforge bench --compile-only --cache DIR`)")
    p.add_argument("--summarize", metavar="RAW_CSV", help="summarize ncu's raw page (--page raw --csv) and stop")
    a = p.parse_args(argv)
    if a.summarize:
        summarize(a.summarize, a.labels)
    else:
        systems = {"eager": None, "irforge": a.pipeline, **dict(v.split("=", 1) for v in a.variant)}
        launch(a.launches, systems, a.labels, a.cache)


if __name__ == "__main__":
    sys.exit(main())
