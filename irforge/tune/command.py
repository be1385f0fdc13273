"""`irforge tune`: search each kernel's schedule on the GPU and keep the winners in the tuning database.

    irforge tune -c "nn.RMSNorm(2048)(torch.randn(1,32,2048))"          # tune, then `irforge compile` replays it
    irforge tune model.py --budget 100 --time 30 --gpus 2 --db tune.sqlite
    irforge tune --suite seed84 --cases 'matmul.*' --compile-only --cache DIR   # no GPU: compile ahead into DIR
    irforge tune --suite seed84 --cases 'matmul.*' --cache DIR                  # on the GPU, from DIR
    irforge tune model.py --show                                         # what the database holds for it
    irforge tune --export winners.json                                   # the winners, as a file to commit

Nothing heavy is imported at module level: `irforge --help` stays instant.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    from irforge.bench import SUITES

    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "file",
        nargs="?",
        help="a Python file defining `model` and `example_inputs`; or a MODEL: a built-in (tinyllama-1.1b, "
        "qwen2.5-7b, smollm2-135m), an HF model directory or config.json (its prefill and decode step)",
    )
    src.add_argument("-c", dest="snippet", metavar="EXPR", help="a Python snippet whose last expression is the program")
    src.add_argument("--suite", choices=list(SUITES), help="the cases of a benchmark suite")
    p.add_argument("--cases", metavar="GLOB[,GLOB]", help="with --suite: only these cases")
    p.add_argument("--budget", type=int, default=200, metavar="N", help="candidates measured per kernel (200)")
    p.add_argument("--time", type=float, default=60.0, metavar="S", help="seconds per kernel (60)")
    p.add_argument("--patience", type=int, default=60, metavar="N", help="stop after N candidates without a gain (60)")
    p.add_argument("--seed", type=int, default=0, help="the search's seed (0): a run is reproducible")
    p.add_argument("--prune-ratio", type=float, default=4.0, metavar="R", help="leave out points the cost model "
                   "predicts R times slower than the heuristic's (4)")  # fmt: skip
    p.add_argument("--gpus", type=int, default=1, metavar="N", help="tune N kernels at once, one worker per GPU")
    p.add_argument("--jobs", type=int, default=0, metavar="N", help="compile processes (default: one per core)")
    p.add_argument("--timeout", type=float, default=20.0, metavar="S", help="a measurement's limit (20 s)")
    p.add_argument("--db", default=None, metavar="PATH", help="the tuning database (default: $IRFORGE_TUNE_DB, else "
                   "~/.cache/irforge/tune.sqlite)")  # fmt: skip
    p.add_argument("--retune", action="store_true", help="tune kernels the database already holds again")
    p.add_argument("--cache", metavar="DIR", help="compiled programs and CUBINs, shared with --compile-only")
    p.add_argument("--compile-only", action="store_true", help="no GPU: compile the likely candidates into --cache")
    p.add_argument("--arch", default=None, help="the GPU arch (default: this GPU's, or sm_90a without one)")
    for where in ("after", "before"):
        p.add_argument(f"--{where}", action="append", default=[], metavar="POINT=PIPE",
                       help=f"run PIPE {where} each place the default lowering runs POINT")  # fmt: skip
    p.add_argument("--show", action="store_true", help="list what the database holds for the program(s)")
    p.add_argument("--export", metavar="FILE", help="write the database's winners as a winners file and stop")
    p.add_argument("-v", dest="verbose", action="count", default=0, help="every candidate's result as it comes")


def names_a_model(file: str | None) -> bool:
    """Whether a command's file argument names a MODEL (a built-in, an HF model directory or config.json) rather
    than a program (a .py file, or IR)."""
    import os

    if file is None or file.endswith((".py", ".ir", ".mlir")):
        return False  # decided without importing irforge.models (and transformers)
    from irforge.models.configs import BUILTIN

    return file in BUILTIN or os.path.isdir(file) or file.endswith(".json")


def run(args, out, err) -> int:
    from dataclasses import replace

    from irforge.diagnostics import error
    from irforge.runtime import has_gpu
    from irforge.runtime.nvrtc import default_arch
    from irforge.target import target, use_target

    from .db import TuneDB

    if args.export:
        from .space import space_version, split_lowering

        db = TuneDB(args.db, seed=None)
        _, suffix = split_lowering(_points(args.after, "after"), _points(args.before, "before"))
        n, stale = db.export_winners(args.export, space_version(suffix))
        out.write(f"wrote {n} winners from {db.path} to {args.export}")
        out.write(f" ({stale} of other schedules left out)\n" if stale else "\n")
        return 0
    if not (args.file or args.snippet or args.suite) and not args.show:
        raise error("say what to tune: a Python file, -c EXPR, or --suite NAME")
    if args.budget < 1 or args.time <= 0 or args.patience < 1 or args.gpus < 1 or args.jobs < 0:
        raise error("--budget, --patience and --gpus take a count of at least 1, --time a positive time")
    if not args.prune_ratio >= 1:
        raise error("--prune-ratio takes a ratio of at least 1 (the heuristic's own point must stay)")
    if args.compile_only and not args.cache:
        raise error("--compile-only writes into a cache: give it --cache DIR")
    if not (args.compile_only or args.show) and not has_gpu():
        err.write("irforge tune: no CUDA GPU is visible here (use --compile-only --cache DIR, or --show)\n")
        return 1
    if args.cache:
        from irforge.bench.compile_cache import CompileCache

        CompileCache(args.cache).use_for_cubins()  # the workers inherit it
    arch = args.arch or default_arch()
    with use_target(replace(target(), arch=arch)):
        return _run(args, arch, out, err)


def _run(args, arch, out, err) -> int:
    from .db import TuneDB
    from .space import split_lowering
    from .tuner import Options, Tuner, kernel_tasks

    after, before = _points(args.after, "after"), _points(args.before, "before")
    prefix, suffix = split_lowering(after, before)
    db = TuneDB.existing(args.db) if args.show else None if args.compile_only else TuneDB(args.db)
    options = Options(
        budget=args.budget,
        seconds=args.time,
        patience=args.patience,
        seed=args.seed,
        gpus=args.gpus,
        jobs=args.jobs,
        arch=arch,
        timeout=args.timeout,
        compile_only=args.compile_only,
        retune=args.retune,
        prune_ratio=args.prune_ratio,
    )
    programs = _programs(args, prefix, err) if (args.file or args.snippet or args.suite) else []
    if args.show:
        from .display import show

        show(db, programs, suffix, arch, out)
        return 0
    display = _display(args, err)
    tuner = Tuner(db, options, display)
    try:
        tasks, notes = kernel_tasks(programs, suffix, tuner)
        for n in notes:
            err.write(f"note: not tuned: {n}\n")
        uses = sum(len(t.uses) for t in tasks)
        version = tasks[0].key.version if tasks else "-"
        err.write(f"{len(tasks)} distinct kernels ({uses} in the program{'s' if len(programs) > 1 else ''}); "
                  f"schedule version {version}, {arch}\n")  # fmt: skip
        t0 = time.monotonic()
        with display:
            results = tuner.run(tasks)
    finally:
        tuner.close()
    from .display import report

    report(results, out, verbose=args.verbose, compiled_only=args.compile_only)
    out.write(f"{len(results)} kernels in {time.monotonic() - t0:.0f} s")
    out.write(f"; database {db.path}\n" if db else f"; CUBINs in {args.cache}\n")
    return 0


def _points(items: list[str], where: str) -> dict[str, str]:
    from irforge.diagnostics import error

    found: dict[str, str] = {}
    for item in items:
        point, eq, pipe = item.partition("=")
        if not eq or not point or not pipe:
            raise error(f"--{where} {item}: expected POINT=PIPE, e.g. --{where} loop-to-tile=my-pass")
        found[point] = f"{found[point]},{pipe}" if point in found else pipe
    return found


def _display(args, err):
    from rich.console import Console

    from .display import Lines, Live

    console = Console(file=err)
    return Live(console) if console.is_terminal else Lines(err, verbose=args.verbose)


# ---- programs --------------------------------------------------------------------------------------------------
def _programs(args, prefix, err) -> list[tuple[str, object]]:
    """(name, loop-level module) of each program named, lowered to the tuning level (from --cache when it holds
    them: capturing a program takes seconds)."""
    if args.suite:
        from irforge.bench.case import select, suite

        return [(c.id, loop_module(c.id, lambda c=c: capture_case(c, prefix), args.cache)) for c in
                select(suite(args.suite), args.cases)]  # fmt: skip
    if names_a_model(args.file):
        return model_programs(args, prefix)
    name = args.file or "<snippet>"
    source = Path(args.file).read_text() if args.file else args.snippet
    return [(Path(name).stem if args.file else "snippet", loop_module(name + source, lambda: _capture(args, prefix),
                                                                       args.cache))]  # fmt: skip


def model_programs(args, prefix) -> list[tuple[str, object]]:
    """A MODEL's prefill and decode step captured as `irforge compile MODEL` captures them (at --dtype, --batch,
    --prompt-len and --max-len; --step: one of them), each distinct segment lowered to the tuning level once: the
    decoder layers' kernels are one program (`decode:layer x22`), tuned once for all of them."""
    from irforge.models import capture_step, instances_of
    from irforge.models.configs import load_config
    from irforge.models.hf import check_sizes
    from irforge.models.program import prefix_kernels
    from irforge.pass_manager import PassManager

    config = load_config(args.file)
    max_len = args.max_len or 2 * args.prompt_len
    check_sizes(config, args.batch, args.prompt_len, max_len)
    out = []
    for step_name, seq in (("prefill", args.prompt_len), ("decode", 1)):
        if args.step not in (None, step_name):
            continue
        step, _ = capture_step(config, step_name, args.dtype, args.batch, seq, max_len)
        for seg in step.segments.values():
            PassManager(prefix).run(seg.module)
            prefix_kernels(seg)
            out.append((f"{step_name}:{seg.name}{instances_of(step, seg.name)}", seg.module))
    return out


def loop_module(identity: str, make, cache: str | None):
    from irforge.bench.compile_cache import source_hash
    from irforge.parser import parse_module
    from irforge.printer import print_module

    if not cache:
        return make()
    digest = hashlib.sha256(f"{identity}\0{source_hash()}".encode()).hexdigest()[:20]
    path = Path(cache) / "loop" / f"{digest}.ir"
    if path.exists():
        return parse_module(path.read_text(), str(path))
    module = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(print_module(module))
    return module


def _capture(args, prefix):
    from irforge import frontend
    from irforge.diagnostics import error

    if args.file and args.file.endswith((".ir", ".mlir")):
        raise error("irforge tune takes a PyTorch program (a .py file or -c); textual IR is irforge-opt's")
    tp = frontend.from_snippet(args.snippet) if args.snippet is not None else frontend.from_file(args.file)
    return capture_program(tp, prefix)


def capture_program(tp, prefix):
    """A `frontend.TorchProgram` captured and lowered by `prefix` (to the tuning level)."""
    from irforge.dialects.torch.capture import capture
    from irforge.pass_manager import PassManager

    captured = capture(tp.model, tp.inputs, tp.input_names)
    PassManager(prefix).run(captured.module)
    return captured.module


def capture_case(case, prefix):
    from irforge.dialects.torch.capture import capture
    from irforge.pass_manager import PassManager

    program = case.program("cpu", init=False)
    captured = capture(program, case.empty_inputs("cpu"), [i.name for i in case.inputs])
    PassManager(prefix).run(captured.module)
    return captured.module
