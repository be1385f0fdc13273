"""`irforge bench`: run a suite, compile it ahead for a GPU run, list it, merge partial runs, compare two runs.

    irforge bench --suite seed84 --list                                  # the cases, shapes, bytes, FLOPs (no GPU)
    irforge bench --suite llm --compile-only --cache DIR                 # any machine: programs and CUBINs into DIR
    irforge bench --suite llm --cache DIR --systems eager,irforge -o OUT # on the GPU: OUT/llm.{json,md,png}
    irforge bench --merge OUT1/llm.json OUT2/llm.json -o OUT             # one report from runs split by --cases
    irforge bench --compare before/llm.json after/llm.json               # what a change did, case by case
    irforge bench --suite seed84 --tuned --db tune.sqlite -o OUT          # + irforge-tuned: `irforge tune`'s winners

Nothing heavy is imported here at module level: `irforge --help` stays instant.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import functools
import multiprocessing
import time
from pathlib import Path

SYSTEM_NAMES = {"eager": "eager", "compile": "torch.compile", "torch.compile": "torch.compile", "irforge": "irforge"}
EXIT_DEVICE_FAILED = 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    from . import COMPILE_MODE, DEFAULT_PIPELINE, SUITES

    p.add_argument("--suite", choices=list(SUITES), help="the suite to run, list or compile")
    p.add_argument("--cases", metavar="GLOB[,GLOB]", help="only the cases whose id matches (e.g. 'matmul.*,R?')")
    p.add_argument(
        "--systems",
        default="eager,compile,irforge",
        help="comma-separated: eager (the reference, always run), compile (torch.compile), irforge",
    )
    p.add_argument("--pipeline", default=DEFAULT_PIPELINE, help="irforge's pipeline, captured torch IR to cuda")
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=PIPELINE",
        help="also time irforge lowered by PIPELINE, as system NAME (repeatable; schedule sweeps)",
    )
    p.add_argument(
        "--tuned",
        action="store_true",
        help="also time irforge with the tuned schedules (`irforge tune`'s winners, replayed) as system irforge-tuned",
    )
    p.add_argument(
        "--db",
        default=None,
        metavar="PATH",
        help="with --tuned: the tuning database (default: $IRFORGE_TUNE_DB, else ~/.cache/irforge/tune.sqlite; made "
        "from the committed winners when missing)",
    )
    p.add_argument("--reps", type=int, default=100, help="timed runs per system (median; default 100)")
    p.add_argument("--min-reps", type=int, default=3, help="runs a slow system gets at least (default 3)")
    p.add_argument("--warmup", type=int, default=10, help="warm-up calls per system at most (default 10)")
    p.add_argument(
        "--max-seconds-per-case",
        type=float,
        default=3.0,
        metavar="S",
        help="budget for a case's timed runs, all systems together (default 3): slow systems get fewer runs",
    )
    p.add_argument("--compile-mode", default=COMPILE_MODE, help=f"torch.compile's mode (default {COMPILE_MODE})")
    p.add_argument("--with-host-overhead", action="store_true", help="let each call's host overhead into its time")
    p.add_argument("-o", dest="output", default="irforge-bench", metavar="DIR", help="where results go")
    p.add_argument("--resume", action="store_true", help="keep the cases already measured in DIR/<suite>.json")
    p.add_argument("--cache", metavar="DIR", help="compiled programs and CUBINs (written by --compile-only)")
    p.add_argument("--compile-only", action="store_true", help="compile into --cache and stop (no GPU needed)")
    p.add_argument("--arch", default="sm_90a", help="the GPU arch --compile-only compiles for (default sm_90a)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="--compile-only: cases compiled at once")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--list", action="store_true", help="print the suite's cases and stop (no GPU needed)")
    mode.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"), help="the per-case change from A to B")
    mode.add_argument("--merge", nargs="+", metavar="JSON", help="merge partial runs of a suite into -o DIR")


def run(args, out, err) -> int:
    from irforge.diagnostics import error

    from . import report

    if args.compare:
        a, b = (report.load(p) for p in args.compare)
        out.write(report.compare(a, b, *args.compare))
        return 0
    if args.merge:
        return _merge(args, out, err)
    if not args.suite:
        raise error("say which suite with --suite (seed84 or llm)")
    from .case import select, suite

    cases = select(suite(args.suite), args.cases)
    if args.list:
        _list(cases, out)
        return 0
    systems = _systems(args)
    if args.reps < 1 or args.min_reps < 1 or args.warmup < 0 or args.max_seconds_per_case <= 0:
        raise error("--reps and --min-reps take a count of at least 1, --max-seconds-per-case a positive time")
    if args.compile_only:
        return _compile_only(args, cases, systems, out, err)
    if not _gpu_ready():
        err.write("irforge bench: no CUDA GPU is visible here (use --list, --compile-only, --merge or --compare)\n")
        return 1
    return _run(args, cases, systems, out, err)


def _gpu_ready() -> bool:
    """A CUDA GPU for irforge's driver and a torch build that can use it (eager and torch.compile need both)."""
    import torch

    from irforge.runtime import has_gpu

    return has_gpu() and torch.cuda.is_available()


def _systems(args) -> dict[str, str | None]:
    """System name -> irforge pipeline (None for the PyTorch systems), eager first."""
    from irforge.diagnostics import error

    names = [s.strip() for s in args.systems.split(",") if s.strip()]
    bad = [n for n in names if n not in SYSTEM_NAMES]
    if bad:
        raise error(f"unknown system '{bad[0]}' in --systems (systems: eager, compile, irforge)")
    chosen = {SYSTEM_NAMES[n] for n in names}
    if "eager" not in chosen:
        raise error("--systems must keep eager: it is the reference every other system is checked against")
    systems: dict[str, str | None] = {n: None for n in ("eager", "torch.compile") if n in chosen}
    if "irforge" in chosen:
        systems["irforge"] = args.pipeline
    if args.tuned:
        systems["irforge-tuned"] = _tuned_pipeline(args)
    for v in args.variant:
        name, sep, pipeline = v.partition("=")
        if not sep or not name or not pipeline:
            raise error(f"--variant takes NAME=PIPELINE, got '{v}'")
        if name in systems:
            raise error(f"--variant name '{name}' is taken")
        systems[name] = pipeline
    for pipeline in {p for p in systems.values() if p}:
        _check_pipeline(pipeline)
    return systems


def _tuned_pipeline(args) -> str:
    """The default lowering replaying the winners of the tuning database (seeded from the committed winners when
    it does not exist yet), as pipeline text."""
    from irforge.compiler import lowering
    from irforge.diagnostics import error
    from irforge.pipeline import schedule_text
    from irforge.tune.db import TuneDB

    from . import DEFAULT_PIPELINE

    if args.pipeline != DEFAULT_PIPELINE:
        raise error("--tuned replays tuned schedules into the default lowering: leave --pipeline out")
    db = TuneDB(args.db)
    path = str(db.path.resolve())
    db.close()
    return schedule_text(lowering("cuda", tuning=path))


def _check_pipeline(pipeline: str) -> None:
    """A pipeline that does not parse, or names an unknown pass, is refused before anything runs."""
    from irforge.pipeline import expand, parse_pipeline

    expand(parse_pipeline(pipeline), "<--pipeline>")


def _list(cases, out) -> None:
    rows = [("id", "family", "model", "shapes", "MB", "GFLOP", "note")]
    for c in cases:
        mb = f"{c.bytes / 1e6:.3f}" if c.bytes is not None else (c.missing() or "?")
        rows.append((c.id, c.family, c.model or "-", c.shapes(), mb, f"{c.flops / 1e9:.3f}", c.note))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        out.write("  ".join(v.ljust(w) if i <= 3 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))))
        out.write(f"  {r[-1]}".rstrip() + "\n")


# ---- compile only ----------------------------------------------------------------------------------------------
def _compile_only(args, cases, systems, out, err) -> int:
    from irforge.diagnostics import error

    from .compile_cache import CompileCache

    if not args.cache:
        raise error("--compile-only writes into a cache: give it --cache DIR")
    pipelines = {n: p for n, p in systems.items() if p}
    if not pipelines:
        raise error("--compile-only compiles irforge's programs: keep irforge (or a --variant) in --systems")
    if args.jobs < 1:
        raise error(f"--jobs {args.jobs}: give at least 1")
    cache = CompileCache(args.cache)
    cache.use_for_cubins()
    progress = Progress(len(cases), err, verb="compiling")
    t0 = time.perf_counter()
    failed = []
    work = functools.partial(
        _compile_and_store, suite_name=args.suite, pipelines=pipelines, cache_dir=args.cache, arch=args.arch
    )
    # Cases are independent and the cache's files are written by rename, so processes may share it.
    # spawn, not fork: a parent that has touched CUDA cannot hand it to forked children.
    spawn = multiprocessing.get_context("spawn")
    pool = concurrent.futures.ProcessPoolExecutor(args.jobs, mp_context=spawn) if args.jobs > 1 else None
    with pool or contextlib.nullcontext():
        done = (pool.map if pool else map)(work, [c.id for c in cases])
        for i, (case, (line, case_failed)) in enumerate(zip(cases, done)):
            progress.start(i, case)
            failed += case_failed
            progress.done_line(line)
    progress.close()
    size = sum(p.stat().st_size for p in Path(args.cache).rglob("*") if p.is_file())
    out.write(
        f"compiled {len(cases)} cases x {len(pipelines)} pipeline(s) for {args.arch} in "
        f"{time.perf_counter() - t0:.0f} s; {len(failed)} failed; cache {args.cache}: {size / 2**20:.1f} MiB\n"
    )
    for f in failed:
        out.write(f"  failed: {f}\n")
    return 0


def _compile_and_store(case_id: str, suite_name: str, pipelines: dict, cache_dir: str, arch: str):
    """Compile one case (by id: a case's function need not pickle) with every pipeline into the cache: its
    progress line and its failures."""
    from dataclasses import replace

    from irforge.target import target, use_target

    from .case import suite
    from .compile_cache import CompileCache, compile_case

    case = next(c for c in suite(suite_name) if c.id == case_id)

    cache = CompileCache(cache_dir)
    cache.use_for_cubins()
    results, failed = [], []
    with use_target(replace(target(), arch=arch)):
        for name, pipeline in pipelines.items():
            if case.missing():
                results.append(f"{name}: {case.missing()}")
                continue
            c = compile_case(case, pipeline, arch)
            cache.store(case, pipeline, arch, c)
            results.append(f"{name}: {'error: ' + c.error if c.error else f'{c.kernels} kernels'} ({c.seconds:.1f} s)")
            if c.error:
                failed.append(f"{case.id} ({name}): {c.error}")
    return case.id + ": " + "; ".join(results), failed


# ---- a run -----------------------------------------------------------------------------------------------------
def _measuring(timer, err) -> tuple[dict, dict]:
    """Set up the device as the method says and measure the ceilings: (ceilings, environment)."""
    import torch

    from .harness import environment, measure_ceilings

    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 on every side
    torch.backends.cudnn.allow_tf32 = False
    err.write("measuring the ceilings (copy bandwidth, f32, bf16 and f16 matmul rates)\n")
    return measure_ceilings(timer), environment()


def _settings_record(systems: dict, s, timer, compile_mode: str, cases: str) -> dict:
    return {
        "systems": list(systems),
        "left_out": [n for n in ("torch.compile",) if n not in systems],
        "pipelines": {n: p for n, p in systems.items() if p},
        "torch.compile mode": compile_mode if "torch.compile" in systems else None,
        "cases": cases,
        "reps": s.reps,
        "min_reps": s.min_reps,
        "warmup": s.warmup,
        "max_seconds_per_case": s.max_seconds_per_case,
        "timing": timer.description(),
    }


def _run(args, cases, systems, out, err) -> int:
    from . import report
    from .compile_cache import CompileCache, irforge_system
    from .harness import CudaTimer, Settings, eager, run_suite, torch_compile

    cache = CompileCache(args.cache) if args.cache else None
    if cache:
        cache.use_for_cubins()
    harness_systems = [
        eager() if name == "eager" else torch_compile(args.compile_mode) if name == "torch.compile"
        else irforge_system(name, pipeline, cache)
        for name, pipeline in systems.items()
    ]  # fmt: skip
    out_dir = Path(args.output)
    previous = _resumed(args.suite, out_dir, list(systems)) if args.resume else None
    done = {r["id"] for r in previous["rows"]} if previous else set()
    todo = [c for c in cases if c.id not in done]
    settings = Settings(args.reps, args.min_reps, args.warmup, args.max_seconds_per_case)
    timer = CudaTimer(host_ahead=not args.with_host_overhead)
    ceilings, env = _measuring(timer, err)
    record = _settings_record(systems, settings, timer, args.compile_mode, args.cases or "all")
    order = [c.id for c in cases]

    def snapshot(rows) -> dict:
        """Everything measured so far (and what --resume kept): written after every case."""
        if cache:
            record["cache"] = {"dir": str(cache.root), "hits": cache.hits, "misses": cache.misses}
        rep = report.new_report(args.suite, env, record, ceilings, rows)
        return report.merge([previous, rep], order)[0] if previous else rep

    log_lines: list[str] = []
    progress = Progress(len(todo), err, verb="timing")
    progress.on_done = lambda rows: report.write(snapshot(rows), out_dir, chart=False)
    rows = run_suite(todo, harness_systems, timer, settings, progress, log=log_lines.append)
    progress.close()
    final = snapshot(rows)
    paths = report.write(final, out_dir)
    out.write("\n".join(report.summary_lines(final)) + "\n")
    out.write(f"README row: {report.readme_row(final, str(paths[1]))}\n")
    if cache and cache.misses:
        out.write(f"cache: {cache.hits} hits, {len(cache.misses)} compiled here: {'; '.join(cache.misses[:5])}\n")
    if log_lines:  # the tracebacks behind the error rows
        paths.append(out_dir / f"{args.suite}.log")
        paths[-1].write_text("\n".join(log_lines) + "\n")
    out.write("wrote " + ", ".join(map(str, paths)) + "\n")
    not_run = [r["id"] for r in rows if any(e.get("status") == "not run" for e in r["systems"].values())]
    if not_run:
        err.write(
            f"irforge bench: the device failed; {len(not_run)} cases not run: rerun the same command with --resume\n"
        )
        return EXIT_DEVICE_FAILED
    return 0


def bench_one(case, irforge, reps: int, out, err) -> None:
    """`irforge run --bench`: one case, timed as a suite's are, against eager and torch.compile; prints its table."""
    from . import COMPILE_MODE, DEFAULT_PIPELINE, report
    from .harness import CudaTimer, Settings, eager, run_suite, torch_compile

    systems = [eager(), torch_compile(), irforge]
    settings = Settings(reps=reps)
    timer = CudaTimer()
    ceilings, env = _measuring(timer, err)
    rows = run_suite([case], systems, timer, settings, log=lambda line: err.write(line + "\n"))
    names = {"eager": None, "torch.compile": None, "irforge": DEFAULT_PIPELINE}
    record = _settings_record(names, settings, timer, COMPILE_MODE, case.id)
    out.write(report.markdown(report.new_report("program", env, record, ceilings, rows)))


def _resumed(suite: str, out_dir: Path, systems: list[str]) -> dict | None:
    """An earlier run's report in the same DIR, keeping the rows that measured every requested system."""
    from . import report

    path = out_dir / f"{suite}.json"
    if not path.exists():
        return None
    previous = report.load(path)
    previous["rows"] = [r for r in previous["rows"] if set(systems) <= set(r["systems"]) and report.complete(r)]
    return previous


def _merge(args, out, err) -> int:
    from . import SUITES, report
    from .case import suite

    reports = [report.load(p) for p in args.merge]
    name = reports[0]["suite"]
    order = [c.id for c in suite(name)] if name in SUITES else None
    merged, notes = report.merge(reports, order)
    for n in notes:
        err.write(f"note: {n}\n")
    paths = report.write(merged, args.output)
    out.write("\n".join(report.summary_lines(merged)) + "\n")
    out.write(f"README row: {report.readme_row(merged, str(paths[1]))}\n")
    out.write("wrote " + ", ".join(map(str, paths)) + "\n")
    return 0


# ---- progress --------------------------------------------------------------------------------------------------
class Progress:
    """A rich progress bar (case i/N, the current case, elapsed, ETA) on a terminal; plain lines otherwise."""

    def __init__(self, total: int, stream, verb: str):
        from rich.console import Console

        self.total = total
        self.stream = stream
        self.verb = verb
        self.t0 = time.perf_counter()
        self.count = 0
        self.on_done = None
        console = Console(file=stream)
        self.bar = None
        if console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=console,
            )
            self.task = self.bar.add_task(verb, total=total)
            self.bar.start()

    def start(self, i: int, case) -> None:
        if self.bar:
            self.bar.update(self.task, description=f"{self.verb} {case.id}")

    def _eta(self) -> str:
        elapsed = time.perf_counter() - self.t0
        left = elapsed / self.count * (self.total - self.count) if self.count else 0.0
        return f"{_clock(elapsed)} elapsed, ETA {_clock(left)}"

    def done_line(self, line: str) -> None:
        self.count += 1
        if self.bar:
            self.bar.console.print(line, markup=False, highlight=False)
            self.bar.advance(self.task)
        else:
            self.stream.write(f"[{self.count}/{self.total}] {line} ({self._eta()})\n")
            self.stream.flush()

    def done(self, row: dict, rows: list) -> None:
        parts = []
        for name, e in row["systems"].items():
            if "median_ms" in e:
                parts.append(f"{name} {e['median_ms'] * 1e3:.1f} us [{e['reps']} runs]")
            else:
                parts.append(f"{name} {e.get('status')}" + (f" ({e['detail']})" if e.get("detail") else ""))
        self.done_line(f"{row['id']}: " + " | ".join(parts))
        if self.on_done:
            self.on_done(rows)

    def close(self) -> None:
        if self.bar:
            self.bar.stop()


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}"
