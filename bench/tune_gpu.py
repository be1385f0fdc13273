"""Tune seed84 and llm kernels on a GPU within the device machine's limits, with a hanging and a faulting kernel
planted in the same run, then time the suites' cases with and without the winners.

    python3 bench/tune_gpu.py compile [--cases GLOBS] [--llm-cases GLOBS] [--bench-cases GLOBS]  # any machine
    python3 bench/tune_gpu.py run [--cases GLOBS] [--llm-cases GLOBS] [--bench-cases GLOBS] [OUT]  # on the GPU

`compile` fills $TUNE_CACHE (default bench/cache/tune, ignored by git: carry it to the GPU machine) with the cases'
loop-level programs, the CUBINs of the reference and heuristic schedules and of the candidates a search is most
likely to ask for (the same search, the cost model's predictions standing in for times), and the untuned bench
programs. `run` (on the GPU, from that cache) tunes every distinct kernel of the cases (`--budget` candidates and
`--time` seconds each at most) and two planted ones, a kernel that hangs and one that stores to address 0
(`test-plant-failure` after kernel-to-cuda: the reference schedule is spared, every scheduled point fails); each
must cost one candidate, recorded as such, and the run must go on. Into OUT (default $OUT, else bench/cache/runs):
`tune.sqlite` (the database; `--db PATH` keeps it at PATH as well, under bench/cache to go on in a later call on
the same machine), `tune.json` (per kernel: what the search did, the baseline and the winner), `winners.json` (to
commit as irforge/tune/winners.json), `bench/seed84.{json,md}` (eager, irforge, irforge-tuned, interleaved, on
--bench-cases) and, with --llm-cases, `bench/llm.{json,md}` on those. Exit 1 when a check fails: a planted kernel
not costing exactly one candidate, a kernel over its budget, a tuned case more than 3 % slower than the
heuristic's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "tests" / "plugins"  # test-plant-failure: in this process and in the workers it starts
sys.path.insert(0, str(PLUGINS))
os.environ["PYTHONPATH"] = os.pathsep.join([str(PLUGINS), *filter(None, [os.environ.get("PYTHONPATH")])])
CONTRACTIONS = "matmul.TL.q.s512,matmul.TL.down.s512,matmul.QW.kv.s128,matmul_add.TL.o.s128,silu_mul_matmul.TL.s32"
PLANTED = {  # name: (program, the pass after kernel-to-cuda that plants the failure, the status it must cost)
    "planted-hang": ("torch.randn(64,1024)*3", "test-plant-failure{mode=hang}", ("timeout",)),
    "planted-fault": ("torch.randn(64,1024)+1", "test-plant-failure{mode=fault}", ("fault", "crash")),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("compile", "run"))
    ap.add_argument("out", nargs="?", default=os.environ.get("OUT") or str(ROOT / "bench/cache/runs"))
    ap.add_argument("--cases", default=os.environ.get("CASES", CONTRACTIONS), help="seed84 case globs to tune")
    ap.add_argument("--llm-cases", default="", help="llm case globs to tune and bench as well (default: none)")
    ap.add_argument("--bench-cases", default=None, help="seed84 case globs to bench after tuning (default: --cases)")
    ap.add_argument("--cache", default=os.environ.get("TUNE_CACHE", str(ROOT / "bench/cache/tune")))
    ap.add_argument("--budget", type=int, default=200, help="candidates per kernel (200)")
    ap.add_argument("--time", type=float, default=60.0, help="seconds per kernel, confirmation included (60)")
    ap.add_argument("--db", default=None, help="continue this database (default: OUT/tune.sqlite)")
    ap.add_argument("--no-plant", action="store_true", help="leave the planted kernels out")
    ap.add_argument("--jobs", type=int, default=0, help="compile processes (default: one per core)")
    args = ap.parse_args()
    args.bench_cases = args.bench_cases or args.cases
    os.environ["IRFORGE_CACHE_DIR"] = args.cache  # the CUBINs: the workers inherit it
    t0 = time.monotonic()
    ok = compile_ahead(args) if args.mode == "compile" else run(args)
    print(f"{args.mode}: {time.monotonic() - t0:.0f} s in all")
    return 0 if ok else 1


def jobs(args, capture: bool):
    """(schedule, [(name, loop module)]) per lowering: the suite's cases, then each planted program."""
    from irforge.tools.cli import main as cli

    from irforge import frontend
    from irforge.bench.case import select, suite
    from irforge.tune.command import capture_case, capture_program, loop_module
    from irforge.tune.space import split_lowering

    prefix, suffix = split_lowering()
    cases = [*select(suite("seed84"), args.cases), *(select(suite("llm"), args.llm_cases) if args.llm_cases else [])]
    out = [(suffix, [(c.id, loop_module(c.id, lambda c=c: capture_case(c, prefix), args.cache)) for c in cases])]
    if not args.no_plant:
        for name, (snippet, plant, _) in PLANTED.items():
            pre, post = split_lowering(after={"kernel-to-cuda": plant})

            def make(snippet=snippet, pre=pre):
                return capture_program(frontend.from_snippet(snippet), pre)

            out.append((post, [(name, loop_module(name + snippet + plant, make, args.cache))]))
    if capture:
        for name, cases in benched(args):
            cli(["bench", "--suite", name, "--cases", cases, "--systems", "eager,irforge", "--compile-only",
                 "--cache", args.cache])  # fmt: skip
    return out


def benched(args) -> list[tuple[str, str]]:
    """(suite, case globs) timed after tuning."""
    return [("seed84", args.bench_cases), *([("llm", args.llm_cases)] if args.llm_cases else [])]


def tasks_of(groups, tuner):
    from irforge.tune.tuner import kernel_tasks

    tasks = []
    for schedule, programs in groups:
        found, notes = kernel_tasks(programs, schedule, tuner)
        for n in notes:
            print(f"note: not tuned: {n}")
        tasks += found
    real = [t for t in tasks if not t.name.startswith("planted")]
    planted = [t for t in tasks if t.name.startswith("planted")]
    return real[:1] + planted + real[1:]  # the planted kernels in the middle of the run


def tune_all(args, db, compile_only: bool) -> list:
    """Tune (or, compile only, search with the cost model's times) every kernel of the cases and the planted ones."""
    from irforge.tune.display import Lines
    from irforge.tune.tuner import Options, Tuner

    groups = jobs(args, capture=compile_only)
    o = Options(budget=args.budget, seconds=args.time, compile_only=compile_only, timeout=15.0, jobs=args.jobs)
    tuner = Tuner(db, o, Lines(sys.stdout, verbose=0))
    try:
        return tuner.run(tasks_of(groups, tuner))
    finally:
        tuner.close()


def compile_ahead(args) -> bool:
    from irforge.tune.display import report

    results = tune_all(args, None, compile_only=True)
    report(results, sys.stdout, compiled_only=True)
    size = sum(p.stat().st_size for p in Path(args.cache).rglob("*") if p.is_file())
    print(f"cache {args.cache}: {size / 2**20:.1f} MiB")
    return all(r.status == "compiled" for r in results if not r.task.name.startswith("planted"))


def run(args) -> bool:
    from irforge.tools.cli import main as cli

    from irforge.runtime import has_gpu
    from irforge.tune.db import TuneDB
    from irforge.tune.display import report
    from irforge.tune.space import space_version, split_lowering

    if not has_gpu():
        print("no GPU here: `compile` runs anywhere, `run` needs the GPU")
        return False
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    db = TuneDB(args.db or out / "tune.sqlite", seed=None)  # measured here, not the committed winners
    t0 = time.monotonic()
    results = tune_all(args, db, compile_only=False)
    tuned_s = time.monotonic() - t0
    report(results, sys.stdout)
    ok = check(results, args)
    (out / "tune.json").write_text(json.dumps(summary(results, tuned_s), indent=1) + "\n")
    n, _ = db.export_winners(out / "winners.json", space_version(split_lowering()[1]))  # not the planted ones
    if db.path.resolve() != (out / "tune.sqlite").resolve():
        shutil.copy(db.path, out / "tune.sqlite")  # the database kept on the machine (--db) comes back too
    print(f"tuning: {tuned_s:.0f} s; {n} winners in {out / 'winners.json'}; database {db.path}")
    t1 = time.monotonic()
    for name, cases in benched(args):
        bench = ["bench", "--suite", name, "--cases", cases, "--systems", "eager,irforge", "--tuned",
                 "--db", str(db.path), "--cache", args.cache]  # fmt: skip
        cli([*bench, "--compile-only", "--jobs", str(os.cpu_count() or 1)])  # every core, before the timed run
        rc = cli([*bench, "-o", str(out / "bench")])
        good = rc == 0 and check_bench(out / "bench" / f"{name}.json")
        ok = ok and good
    print(f"bench --tuned: {time.monotonic() - t1:.0f} s; in all {time.monotonic() - t0:.0f} s")
    return ok


def check(results, args) -> bool:
    ok = True
    for r in results:
        planted = PLANTED.get(r.task.name.split("/")[0])
        if planted:
            statuses = [c.status for c in r.candidates]
            good = r.status == "failed" and len(statuses) == 1 and statuses[0] in planted[2]
            print(f"{'ok' if good else 'FAILED'}: {r.task.name} cost {statuses} ({r.detail})")
            ok &= good
        elif r.status == "tuned":
            over = r.measured > args.budget or r.seconds > args.time + 5
            if over:
                print(f"FAILED: {r.task.name}: {r.measured} candidates in {r.seconds:.0f} s")
            ok &= not over
        elif r.status != "cached":
            print(f"FAILED: {r.task.name}: {r.status} ({r.detail})")
            ok = False
    return ok


def summary(results, seconds: float) -> dict:
    rows = []
    for r in results:
        best = r.winner.median_s if r.winner else None
        base = r.baseline.median_s if r.baseline else None
        rows.append({
            "kernel": r.task.name, "uses": r.task.uses, "status": r.status, "detail": r.detail,
            "candidates": r.measured, "pruned": r.pruned, "failed": r.failed, "seconds": round(r.seconds, 1),
            "baseline_s": base, "best_s": best, "speedup": base / best if base and best else None,
            "winner": r.winner.point if r.winner else None, "prior_trusted": r.reliable, "left_out": r.unlikely,
        })  # fmt: skip
    gains = [x["speedup"] for x in rows if x["speedup"]]
    geomean = math.exp(sum(map(math.log, gains)) / len(gains)) if gains else None
    return {"seconds": round(seconds, 1), "kernel_geomean_speedup": geomean, "kernels": rows}


def check_bench(path: Path) -> bool:
    """Tuned >= heuristic on every case (within 3 %: the two are timed interleaved in one run)."""
    report = json.loads(path.read_text())
    ok, ratios = True, []
    for row in report["rows"]:
        s = row["systems"]
        base, tuned = s.get("irforge", {}).get("median_ms"), s.get("irforge-tuned", {}).get("median_ms")
        if base and tuned:
            ratios.append(base / tuned)
            if tuned > base * 1.03:
                print(f"FAILED: {row['id']}: tuned {tuned * 1e3:.1f} us, heuristic {base * 1e3:.1f} us")
                ok = False
        else:
            print(f"FAILED: {row['id']}: {s.get('irforge-tuned', {}).get('status')}")
            ok = False
    if ratios:
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"{report['suite']} cases: tuned vs heuristic geomean {geo:.3f}x over {len(ratios)} cases")
    return ok


if __name__ == "__main__":
    sys.exit(main())
