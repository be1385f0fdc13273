"""Memory-bound kernels through the irforge backend, against eager and torch.compile, in one run on one GPU.

Measures the copy bandwidth first, then RMSNorm (4096, 4096), softmax (4096, 4096), silu(g) * u (4096, 11008) and
the seed's `nn.Softmax(dim=-1)(torch.randn(1, 28, 2048, 2048))`, in f32 and bf16. The irforge kernels are the
hand-written kernel-level schedules of `irforge.dialects.kernel.examples` (until the tile passes generate them),
lowered with the `kernel-to-cuda` pipeline, compiled by NVRTC and run by `irforge.runtime.Executor`; RMSNorm and
softmax hold their row in registers (one read, one write). The goal of
this first schedule: large memory-bound kernels at >= 70% of the measured copy bandwidth.

    python bench/memory_bound.py                       # everything, results in $OUT (or bench/results)
    python bench/memory_bound.py --cases rms --no-compile --reps 100
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Case, System, eager, markdown, run_suite, torch_compile, write_report

EPS = 1e-6


def cases(selected: str = ""):
    """(Case, example, reshape) triples: the example is the irforge kernel, reshape adapts the case's inputs."""
    import torch
    import torch.nn.functional as F
    from irforge.dialects.kernel import examples as E

    out = []
    for dtype, tdt in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        size = 4 if dtype == "f32" else 2

        def randn(*shape, tdt=tdt):
            return torch.randn(*shape, device="cuda", dtype=tdt)

        r, c = 4096, 4096
        out.append(
            (
                Case(
                    f"rms_norm {dtype} [{r},{c}]",
                    lambda r=r, c=c, randn=randn: (randn(r, c), randn(c)),
                    lambda x, w, c=c: F.rms_norm(x, (c,), w, EPS),
                    bytes=(2 * r * c + c) * size,
                ),
                E.rms_norm_registers(r, c, dtype, block=256, eps=EPS),
                None,
            )
        )
        out.append(
            (
                Case(
                    f"softmax {dtype} [{r},{c}]",
                    lambda r=r, c=c, randn=randn: (randn(r, c),),
                    lambda x: torch.softmax(x, -1),
                    bytes=2 * r * c * size,
                ),
                E.softmax_registers(r, c, dtype, block=256),
                None,
            )
        )
        r2, c2 = 4096, 11008
        out.append(
            (
                Case(
                    f"silu_mul {dtype} [{r2},{c2}]",
                    lambda r=r2, c=c2, randn=randn: (randn(r, c), randn(r, c)),
                    lambda g, u: F.silu(g) * u,
                    bytes=3 * r2 * c2 * size,
                ),
                E.silu_mul(r2, c2, dtype, block=256),
                None,
            )
        )
        seed_shape = (1, 28, 2048, 2048)
        out.append(
            (
                Case(
                    f"seed nn.Softmax {dtype} {list(seed_shape)}",
                    lambda randn=randn: (randn(*seed_shape),),
                    lambda x: torch.nn.Softmax(dim=-1)(x),
                    bytes=2 * 28 * 2048 * 2048 * size,
                ),
                E.softmax_registers(28 * 2048, 2048, dtype, block=256),
                (28 * 2048, 2048),
            )
        )
    return [t for t in out if selected in t[0].id]


def irforge_system(triples) -> System:
    """The irforge backend: each case's kernel-level program, lowered, compiled and run on the case's tensors."""
    from irforge.runtime import Executor
    from irforge.runtime.selfcheck import lower

    by_id = {case.id: (ex, shape) for case, ex, shape in triples}

    def build(case):
        ex, shape = by_id[case.id]
        exe = Executor(lower(ex.ir, f"{ex.name}.ir"))

        def run(*inputs):
            ins = [x.view(shape) for x in inputs] if shape else inputs
            (y,) = exe(*ins)
            return y.view(inputs[0].shape)

        return run

    return System("irforge", build)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="", help="only cases whose id contains this text")
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out (it autotunes for minutes)")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--out", default=os.environ.get("OUT") or "bench/results")
    ap.add_argument("--with-host-overhead", action="store_true", help="let each call's host overhead into its time")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("memory_bound: no CUDA GPU visible to torch", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    triples = cases(args.cases)
    systems = [eager()] + ([] if args.no_compile else [torch_compile()]) + [irforge_system(triples)]
    report = run_suite(
        [t[0] for t in triples], systems, reps=args.reps, warmup=args.warmup, host_ahead=not args.with_host_overhead
    )
    for p in write_report(report, args.out, "memory_bound"):
        print("wrote", p)
    print(markdown(report))
    goal = [r for r in report.rows if r["systems"].get("irforge", {}).get("pct_copy_bw", 0) < 70]
    print("irforge rows under 70% of copy bandwidth:", ", ".join(r["id"] for r in goal) or "none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
