"""Running compiled programs on the GPU: what `irforge run` does, and what the GPU tests and benchmarks reuse.

    prog = compile_program(frontend.from_snippet(code), "cuda")
    results = check_on_gpu(prog)          # [(output array, Comparison with PyTorch eager)] per output
    case, system = bench_case(tp, prog)   # an irforge.bench Case and its irforge System

A program at the cuda level runs through `irforge.runtime.Executor` (NVRTC, module load, launches on torch
tensors); its params come from the capture (`prog.params`), its inputs are the example inputs the program was
captured with, and the reference is PyTorch eager's outputs on them (`prog.expected`).
"""

from __future__ import annotations

import numpy as np

from .diagnostics import error


def executor(prog, **kw):
    """An `Executor` for a cuda-level program with its captured params bound."""
    from .compiler import params_in_use
    from .runtime import Executor

    if prog.level != "cuda":
        raise error(f"only cuda-level programs run on the GPU; this one is at the {prog.level} level")
    return Executor(prog.module, params=params_in_use(prog.module, prog.params), **kw)


def to_numpy(t) -> np.ndarray:
    import torch

    t = t.detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).cpu().numpy()


def check_on_gpu(prog, *, sync_each: bool = True) -> list[tuple[np.ndarray, object]]:
    """Run the program once on its example inputs; each output with its comparison against PyTorch eager."""
    import torch

    from .testing import compare

    types = _output_types(prog)
    exe = executor(prog, sync_each=sync_each)
    outs = [to_numpy(o.clone()) for o in exe(*prog.inputs)]
    torch.cuda.synchronize()
    return [(o, compare(o, e, t.dtype)) for o, e, t in zip(outs, prog.expected, types)]


def _output_types(prog) -> list:
    from .dialects.cuda import ops as C

    for op in prog.module.body.ops:
        if isinstance(op, C.ProgramOp):
            out = next(o for o in op.body.ops if isinstance(o, C.OutputOp))
            return [v.type for v in out.values]
    raise error("the module has no cuda.program")


def bench_case(tp, prog, name: str = "program"):
    """A bench `Case` for a captured program (its example inputs, its module as the eager reference) and the
    `System` that runs the compiled program through irforge."""
    import copy

    from .bench.case import Case, Input
    from .bench.harness import System, executor_fn

    inputs = tuple(
        Input(n, tuple(t.shape), t.dtype, lambda gen, device, t=t: t.to(device))
        for n, t in zip(tp.input_names, tp.inputs)
    )
    case = Case(name, "program", inputs, flops=0, module=lambda: copy.deepcopy(tp.model))
    run = executor_fn(executor(prog))
    return case, System("irforge", lambda case, program: run)
