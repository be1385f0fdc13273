"""The memory-bound suite compiled from PyTorch by irforge's own pipelines, against eager and torch.compile, in one
run on one GPU (docs in ../shared/BENCHMARKS.md, method in bench/harness.py).

Measures the copy bandwidth first, then RMSNorm (4096, 4096), softmax (4096, 4096), silu(g) * u (4096, 11008) and
the seed's `nn.Softmax(dim=-1)(torch.randn(1, 28, 2048, 2048))`, in f32 and bf16. Each irforge program is the
PyTorch function captured and lowered by `torch-to-cuda` (the default schedule of passes/tile/heuristics.py, no
hand-written kernel), compiled by NVRTC and run by `irforge.runtime.Executor`; every result is checked against
eager before it is timed. Where the default schedule stages a row in shared memory, the same pipeline without
`tile-stage-inputs` is timed beside it ("irforge (no stage)"). The goal of this first schedule: large
memory-bound kernels at >= 70% of the measured copy bandwidth.

    python bench/compiled_memory_bound.py                         # everything; results in $OUT or bench/results
    python bench/compiled_memory_bound.py --cases softmax --no-compile --reps 100
    python bench/compiled_memory_bound.py --print-ir tile --cases "rms_norm f32"   # the schedule, then exit
    python bench/compiled_memory_bound.py --cases seed --variant "warp rows=map-to-tile,kernel(tile-cooperative-\
reduce{threads=32},tile-blockify,tile-vectorize),tile-to-kernel,kernel-to-cuda"   # other schedules beside the default
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness import Case, System, eager, markdown, run_suite, torch_compile, write_report

EPS = 1e-6


def workloads():
    """(case id, torch function, input shapes, bytes per element factor) for every case, f32 then bf16."""
    import torch
    import torch.nn.functional as F

    out = []
    for dtype, tdt in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        out += [
            (
                f"rms_norm {dtype} [4096,4096]",
                lambda x, w: F.rms_norm(x, (4096,), w, EPS),
                [(4096, 4096), (4096,)],
                tdt,
            ),
            (f"softmax {dtype} [4096,4096]", lambda x: torch.softmax(x, -1), [(4096, 4096)], tdt),
            (f"silu_mul {dtype} [4096,11008]", lambda g, u: F.silu(g) * u, [(4096, 11008), (4096, 11008)], tdt),
            (
                f"seed nn.Softmax {dtype} [1,28,2048,2048]",
                lambda x: torch.nn.Softmax(dim=-1)(x),
                [(1, 28, 2048, 2048)],
                tdt,
            ),
        ]
    return out


# The default schedule, and a variant timed beside it: the same passes without shared-memory staging (the second
# pass over a row then reads global memory again, mostly from L2), to see which the default should be.
DEFAULT = "loop-to-tile,tile-to-kernel,kernel-to-cuda"
NO_STAGE = "map-to-tile,kernel(tile-cooperative-reduce,tile-blockify,tile-vectorize),tile-to-kernel,kernel-to-cuda"


def compile_case(fn, shapes, tdt, level: str = "loop"):
    """The irforge program of `fn` on inputs of these shapes (captured on the CPU), lowered to `level`."""
    import torch

    from irforge import frontend
    from irforge.compiler import compile_program

    class Fn(torch.nn.Module):
        def forward(self, *xs):
            return fn(*xs)

    inputs = tuple(torch.randn(*s, dtype=tdt) for s in shapes)
    return compile_program(frontend.from_module(Fn(), inputs), level)


def lower(prog, pipeline: str):
    """A copy of a loop-level program's module lowered by `pipeline`."""
    from irforge.pass_manager import run_pipeline

    module = prog.module.clone()
    run_pipeline(module, pipeline)
    return module


def build(selected: str, log, variants: dict[str, str] | None = None):
    """The harness cases, the irforge system and one system per variant pipeline (default: the no-staging variant,
    for cases the default stages); compile failures are logged and leave that row to the others."""
    import torch

    from irforge.printer import print_module
    from irforge.runtime import Executor

    cases, runners = [], {}
    pipelines = variants or {"irforge (no stage)": NO_STAGE}
    extra = {name: {} for name in pipelines}
    for cid, fn, shapes, tdt in workloads():
        if selected not in cid:
            continue
        size = torch.tensor([], dtype=tdt).element_size()
        nbytes = (sum(_numel(s) for s in shapes) + _numel(shapes[0])) * size  # inputs read once, output written once
        cases.append(
            Case(cid, lambda shapes=shapes, tdt=tdt: _cuda_inputs(shapes, tdt), fn, bytes=nbytes, note="torch-to-cuda")
        )
        t0 = time.perf_counter()
        try:
            prog = compile_case(fn, shapes, tdt)
            exe = Executor(lower(prog, DEFAULT), params=prog.params)
            runners[cid] = exe
            res = ", ".join(f"{k}: {v}" for k, v in exe.resources().items())
            log(f"{cid}: compiled in {time.perf_counter() - t0:.1f} s; kernels {res}")
        except Exception as e:  # a compile failure is a result to report, not a reason to lose the run
            log(f"{cid}: irforge failed to compile: {type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}")
            continue
        if variants is None and "tile.stage" not in print_module(lower(prog, "loop-to-tile")):
            continue
        for name, pipeline in pipelines.items():
            try:
                extra[name][cid] = Executor(lower(prog, pipeline), params=prog.params)
            except Exception as e:
                log(f"{cid}: variant {name!r} failed to compile: {type(e).__name__}: {e}")
    return cases, [System("irforge", _runner(runners))] + [System(n, _runner(ex)) for n, ex in extra.items()]


def _runner(executors: dict):
    def build(case):
        exe = executors.get(case.id)
        if exe is None:
            return None

        def run(*inputs):
            outs = exe(*inputs)
            return outs[0] if len(outs) == 1 else tuple(outs)

        return run

    return build


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _cuda_inputs(shapes, tdt):
    import torch

    return tuple(torch.randn(*s, device="cuda", dtype=tdt) for s in shapes)


def print_ir(selected: str, level: str) -> None:
    from irforge.printer import print_module

    for cid, fn, shapes, tdt in workloads():
        if selected in cid:
            print(f"// ---- {cid} at the {level} level")
            print(print_module(compile_case(fn, shapes, tdt, level).module))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="", help="only cases whose id contains this text")
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out (it autotunes for minutes)")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--out", default=os.environ.get("OUT") or "bench/results")
    ap.add_argument("--print-ir", metavar="LEVEL", help="print each selected case's IR at LEVEL and exit (no GPU)")
    ap.add_argument(
        "--variant",
        action="append",
        metavar="NAME=PIPELINE",
        help="time the loop-level program lowered by PIPELINE beside the default, as system NAME (repeatable; "
        "replaces the no-staging variant)",
    )
    args = ap.parse_args(argv)
    variants = None
    if args.variant:
        bad = [v for v in args.variant if "=" not in v]
        if bad:
            ap.error(f"--variant takes NAME=PIPELINE, got {bad[0]!r}")
        variants = dict(v.split("=", 1) for v in args.variant)
    if args.print_ir:
        print_ir(args.cases, args.print_ir)
        return 0
    import torch

    if not torch.cuda.is_available():
        print("compiled_memory_bound: no CUDA GPU visible to torch", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    cases, irforge = build(args.cases, print, variants)
    systems = [eager()] + ([] if args.no_compile else [torch_compile()]) + irforge
    report = run_suite(cases, systems, reps=args.reps, warmup=args.warmup)
    for p in write_report(report, args.out, "compiled_memory_bound"):
        print("wrote", p)
    print(markdown(report))
    rows = [r for r in report.rows if "median_ms" in r["systems"].get("irforge", {})]
    large = [r for r in rows if r["bytes"] >= 64 << 20]
    under = [r["id"] for r in large if r["systems"]["irforge"]["pct_copy_bw"] < 70]
    missing = [r["id"] for r in report.rows if r not in rows]
    print(f"irforge rows timed: {len(rows)} of {len(report.rows)}; not timed: {', '.join(missing) or 'none'}")
    print(f"large rows (>= 64 MB) under 70% of copy bandwidth: {', '.join(under) or 'none'}")
    return 0 if not missing else 1


if __name__ == "__main__":
    sys.exit(main())
