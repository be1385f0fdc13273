"""Running compiled programs on the GPU: what `irforge run` does, and what the GPU tests and benchmarks reuse.

    prog = compile_program(frontend.from_snippet(code), "cuda")
    results = check_on_gpu(prog)          # [(output array, Comparison with PyTorch eager)] per output
    case, systems = bench_setup(tp, prog)  # a bench.harness Case and its irforge System

A program at the cuda level runs through `irforge.runtime.Executor` (NVRTC, module load, launches on torch
tensors); its params come from the capture (`prog.params`), its inputs are the example inputs the program was
captured with, and the reference is PyTorch eager's outputs on them (`prog.expected`).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from .diagnostics import error


def executor(prog, **kw):
    """An `Executor` for a cuda-level program with its captured params bound."""
    from .compiler import params_in_use
    from .runtime import Executor

    if prog.level != "cuda":
        raise error(f"only cuda-level programs run on the GPU; this one is at the {prog.level} level")
    exe = Executor(prog.module, params=params_in_use(prog.module, prog.params), **kw)
    if prog.state:  # the state the example run started from
        import torch

        from .runtime.executor import torch_dtype

        exe.set_state(
            {
                n: torch.from_numpy(np.ascontiguousarray(v)).to(exe.device, torch_dtype(exe.state_types[n].dtype))
                for n, v in prog.state.items()
            }
        )
    return exe


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


def harness_module():
    """The repository's `bench/harness.py` (the benchmark method of BENCHMARKS.md)."""
    root = Path(__file__).resolve().parent.parent / "bench"
    if not (root / "harness.py").exists():
        raise error(f"benchmarking needs the repository's bench/harness.py (looked in {root})")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    import harness

    return harness


def bench_setup(tp, prog, name: str = "program"):
    """A harness `Case` for the program (inputs on the GPU, eager on the GPU as the reference) and the `System`
    that runs it through irforge."""
    import copy

    import torch

    harness = harness_module()
    model = copy.deepcopy(tp.model).to("cuda")
    inputs = tuple(t.to("cuda") for t in tp.inputs)
    nbytes = sum(t.numel() * t.element_size() for t in [*tp.inputs, *tp.outputs])
    nbytes += sum(math.prod(a.shape) * _itemsize(prog, k) for k, a in prog.params.items())

    def eager(*xs):
        with torch.no_grad():
            return model(*xs)

    case = harness.Case(name, lambda: inputs, eager, bytes=nbytes)
    exe = executor(prog)
    system = harness.System("irforge", lambda c: exe)
    return case, system


def _itemsize(prog, param: str) -> int:
    from .dialects.cuda import ops as C
    from .dialects.kernel.types import element_bytes

    for op in prog.module.walk():
        if isinstance(op, C.ParamOp) and op.attributes["sym"].name == param:
            return element_bytes(op.result.type.dtype)
    return 4
