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


def run_on_gpu(prog) -> list[np.ndarray]:
    """Run the program once on its inputs; its outputs."""
    import torch

    outs = [to_numpy(o.clone()) for o in executor(prog)(*prog.inputs)]
    torch.cuda.synchronize()
    return outs


def load_cuda_program(path: str, model: str | None = None):
    """A cuda-level .ir file as a `Program`. Its params and inputs come from the Python file it was compiled from
    (`model`: its weights, example inputs and eager outputs, the reference), else are drawn at random (seeded by
    each param's name and by position, as the interpreters draw them), with no reference."""
    from .compiler import Program, compile_program
    from .dialects.cuda import ops as C
    from .interpreter import param_value, random_array
    from .location import FileLineColLoc
    from .parser import parse_module, read_source
    from .pipeline import module_level

    module = parse_module(read_source(path), path)
    level = module_level(module)
    if level != "cuda":
        raise error(
            f"irforge run takes cuda-level IR, and this file is at the {level} level; lower it first: "
            f"irforge-opt {path} --pass-pipeline=PIPE",
            FileLineColLoc(path, 1, 1),
        )
    inputs = sorted((op for op in module.walk() if isinstance(op, C.InputOp)), key=lambda op: op.attributes["position"])
    names = [op.result.name_hint or f"arg{op.attributes['position']}" for op in inputs]
    if model is not None:
        from .frontend import from_file

        captured = compile_program(from_file(model), "torch")
        return Program(module, "cuda", captured.params, names, captured.inputs, captured.expected)
    rng = np.random.default_rng(0)
    params = {
        op.attributes["sym"].name: param_value(op.attributes["sym"].name, op.result.type, None, 0)
        for op in module.walk()
        if isinstance(op, C.ParamOp)
    }
    return Program(module, "cuda", params, names, [random_array(op.result.type, rng) for op in inputs])


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
