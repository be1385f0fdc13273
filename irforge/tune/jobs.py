"""What the tuner's worker processes run (`worker.Worker.call("irforge.tune.jobs:...")`).

On the CPU, `compile_point`: an isolated loop-level kernel with a point in its `tune` attribute, lowered to the cuda
level by the rest of the pipeline (verified after each pass) and compiled by NVRTC, with the resource counts of its
CUBIN; CUBINs land in the runtime's cache, where the GPU worker finds them.

On the GPU, `prepare` then `measure`: the kernel's inputs are made from a seed and its reference outputs computed
once (by the reference schedule); each candidate is run, compared with the reference (`bench.harness.compare`) and
timed by the benchmark harness (`bench.harness`: CUDA events, L2 flushed before each run, the median). A failure
that leaves the device unusable (an illegal address) says so (`poisoned`): the tuner then starts a fresh process.
"""

from __future__ import annotations

import hashlib
import time

_PARSED: dict[str, object] = {}  # module text digest -> parsed module (a worker compiles many points of one kernel)


def compile_point(module_text: str, point: dict, pipeline: str, arch: str) -> dict:
    """{"text": cuda-level program, "kernels": [per cuda kernel: name, grid, block, dynamic smem, CUBIN counts],
    "seconds"}; or {"refused": message} when a pass refuses the point, {"error": message} when NVRTC rejects the
    code."""
    import dataclasses

    from irforge.diagnostics import IRForgeError
    from irforge.dialects.cuda.ops import CudaKernelOp
    from irforge.pass_manager import run_pipeline
    from irforge.printer import print_module
    from irforge.runtime.nvrtc import resource_usage
    from irforge.target import target, use_target

    from .space import set_tune

    t0 = time.perf_counter()
    module = _parsed(module_text).clone()
    set_tune(module, point)
    try:
        with use_target(dataclasses.replace(target(), arch=arch)):
            run_pipeline(module, pipeline)
    except IRForgeError as e:  # a pass after the decisions' refuses the point: pruned like one over a limit
        return {"refused": e.message, "seconds": time.perf_counter() - t0}
    try:
        kernels = []
        for op in module.body.ops:
            if isinstance(op, CudaKernelOp):
                a = op.attributes
                usage = resource_usage(a["source"], a["sym_name"], arch=arch).get(a["sym_name"])
                counts = dataclasses.asdict(usage) if usage else {}
                kernels.append(
                    {"name": a["sym_name"], "grid": a["grid"], "block": a["block"], "dynamic_smem": a["smem"], **counts}
                )
    except IRForgeError as e:
        return {"error": e.message, "seconds": time.perf_counter() - t0}
    return {"text": print_module(module), "kernels": kernels, "seconds": time.perf_counter() - t0}


def _parsed(text: str):
    from irforge.parser import parse_module

    key = hashlib.sha256(text.encode()).hexdigest()
    if key not in _PARSED:
        _PARSED.clear()
        _PARSED[key] = parse_module(text, "<tuned kernel>")
    return _PARSED[key]


# ---- the GPU side ----------------------------------------------------------------------------------------------
_GPU: dict = {"kernel": None}


def prepare(kernel: str, reference_text: str, tolerance: float) -> dict:
    """Make the inputs of `kernel` (its key seeds them) and its reference outputs; {"seconds": the reference's
    run} or {"error"/"poisoned"}."""
    import torch

    from irforge.bench.harness import CudaTimer

    _GPU.update(kernel=None, inputs=None, reference=None)
    if _GPU.get("timer") is None:
        torch.backends.cuda.matmul.allow_tf32 = False
        _GPU["timer"] = CudaTimer()
    t0 = time.perf_counter()
    try:
        exe = _executor(reference_text)
        gen = torch.Generator(device="cuda").manual_seed(int(kernel[:8], 16))
        inputs = [_random(exe.input_types[i], gen) for i in range(len(exe.input_types))]
        reference = [o.clone() for o in _outputs(exe, inputs)]
        torch.cuda.synchronize()
    except Exception as e:
        return _failure(e)
    _GPU.update(kernel=kernel, inputs=inputs, reference=reference, tolerance=tolerance)
    return {"seconds": time.perf_counter() - t0, "gpu": torch.cuda.get_device_name()}


def measure(kernel: str, programs: dict[str, str], settings: dict) -> dict:
    """Per program: {"status": "ok", "median_s", "p10_s", "p90_s", "reps"}, or {"status": "wrong"|"error",
    "detail"}; the programs that run correctly are timed together, interleaved. A failure that poisons the
    device ends the request: {"poisoned": name, "status": "fault", "detail"}."""
    import numpy as np
    import torch

    from irforge.bench.harness import Settings, compare, time_calls

    if _GPU["kernel"] != kernel:
        raise RuntimeError(f"kernel {kernel[:12]} is not prepared in this worker")
    inputs, reference = _GPU["inputs"], _GPU["reference"]
    out: dict[str, dict] = {}
    fns = {}
    for name, text in programs.items():
        try:
            exe = _executor(text)
            result = _outputs(exe, inputs)
            torch.cuda.synchronize()
        except Exception as e:
            failure = _failure(e)
            if "poisoned" in failure:
                return {"poisoned": name, "status": "fault", "detail": failure["detail"]}
            out[name] = {"status": "error", "detail": failure["detail"]}
            continue
        ok, err, why = compare(list(result), reference, _GPU["tolerance"])
        if not ok:
            out[name] = {"status": "wrong", "detail": why, "rel_error": err}
            continue
        fns[name] = lambda exe=exe: exe(*inputs)
    try:
        times = time_calls(fns, _GPU["timer"], Settings(**settings)) if fns else {}
    except Exception as e:  # one of them failed while timed: which one is unknown
        failure = _failure(e)
        if "poisoned" in failure:
            return {"poisoned": ",".join(fns), "status": "fault", "detail": failure["detail"]}
        return {**out, **{name: {"status": "error", "detail": f"timing: {failure['detail']}"} for name in fns}}
    for name, ts in times.items():
        s = np.array(ts) / 1e3
        out[name] = {
            "status": "ok",
            "median_s": float(np.median(s)),
            "p10_s": float(np.percentile(s, 10)),
            "p90_s": float(np.percentile(s, 90)),
            "reps": len(ts),
        }
    return out


def _executor(text: str):
    from irforge.parser import parse_module
    from irforge.runtime import Executor

    return Executor(parse_module(text, "<candidate>"))


def _outputs(exe, inputs) -> list:
    """A call's outputs and, after them, the states it updated in place (a kernel that writes a KV cache): both are
    what a candidate must get right."""
    return [*exe(*inputs), *exe.state.values()]


def _random(t, gen):
    """A random tensor of type `t`: floats standard normal, booleans fair coins, integers 0 (always a valid
    index)."""
    import torch

    from irforge.runtime.executor import torch_dtype

    dtype = torch_dtype(t.dtype)
    if dtype.is_floating_point:
        return torch.randn(t.shape, generator=gen, device="cuda", dtype=torch.float32).to(dtype)
    if dtype == torch.bool:
        return torch.rand(t.shape, generator=gen, device="cuda") < 0.5
    return torch.zeros(t.shape, device="cuda", dtype=dtype)


def _failure(e: Exception) -> dict:
    from irforge.bench.harness import device_alive, first_line

    detail = first_line(e)
    if not device_alive("cuda"):
        return {"poisoned": True, "detail": detail}
    return {"error": detail, "detail": detail}
