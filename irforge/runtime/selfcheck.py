"""GPU self-checks shared by the GPU tests and `bench/gpu_smoke.py`: run kernel-level programs through the whole
path (kernel-to-cuda, NVRTC, module load, launch on torch tensors) and compare with references.

Two kinds of programs: the hand-written examples (`irforge.dialects.kernel.examples`, checked against float64
numpy and against torch), and one small program per scalar op and dtype (checked against the kernel simulator, so
the emitter and its prelude are held to the same semantics as the reference interpreter).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from irforge.dialects.kernel.examples import Example
from irforge.scalar_ops import SCALAR_OPS, quantize
from irforge.types import ScalarType


@dataclass
class Check:
    name: str
    ok: bool
    error: float = float("nan")  # ||out - ref|| / ||ref|| (worst output)
    detail: str = ""
    ms: float = float("nan")  # median time of one call, when timed
    extra: dict = field(default_factory=dict)


def rel_error(out: np.ndarray, ref: np.ndarray) -> float:
    out, ref = np.asarray(out, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def to_numpy(t) -> np.ndarray:
    import torch

    t = t.detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).cpu().numpy()


def lower(ir: str, name: str = "<example>"):
    from irforge.parser import parse_module
    from irforge.pass_manager import run_pipeline

    m = parse_module(ir, name)
    run_pipeline(m, "kernel-to-cuda")
    return m


def check_example(ex: Example, rng, *, use_graph: bool = False, time_it: bool = False) -> Check:
    """Run one example on the GPU: every output element written (outputs start poisoned), close to float64 numpy
    (and to torch, where the example has a torch reference)."""
    import torch

    from .executor import Executor

    ex_ins = ex.make_inputs(rng)
    module = lower(ex.ir, f"{ex.name}.ir")
    exe = Executor(module, use_graph=use_graph, sync_each=True)
    outs = exe(*ex_ins)
    torch.cuda.synchronize()
    got = [to_numpy(o) for o in outs]
    refs = ex.reference(ex_ins)
    errors, notes = [], []
    for i, (g, r) in enumerate(zip(got, refs)):
        if g.shape != r.shape:
            return Check(ex.name, False, detail=f"output {i} has shape {g.shape}, expected {r.shape}")
        nan = ~np.isfinite(g) & np.isfinite(r)
        if nan.any():
            return Check(ex.name, False, detail=f"output {i}: {int(nan.sum())} elements not finite (unwritten?)")
        errors.append(rel_error(g, r))
    err = max(errors)
    ok = err < ex.rtol
    if ex.torch_reference is not None:
        tins = [torch.from_numpy(np.require(x, requirements="C")).cuda() for x in ex_ins]
        if "bf16" in ex.name:
            tins = [t.bfloat16() for t in tins]
        tref = ex.torch_reference(*tins)
        terr = max(rel_error(g, to_numpy(t)) for g, t in zip(got, tref))
        notes.append(f"vs torch {terr:.1e}")
        ok = ok and terr < max(ex.rtol, 2e-2 if "bf16" in ex.name else 1e-4)
    ms = float("nan")
    if time_it:  # a second executor without the per-launch synchronisation, which the events would count
        fast = Executor(module, use_graph=use_graph)
        tins = fast.prepare_inputs(*ex_ins)  # on the device, in the program's types, once
        fast(*tins)
        ms = time_call(lambda: fast(*tins))
    return Check(ex.name, ok, err, "; ".join(notes), ms, {"resources": exe.resources()})


def time_call(fn, warmup: int = 5, reps: int = 50) -> float:
    """Median milliseconds of `fn` on the GPU, with CUDA events (a quick look; irforge.bench does it properly).
    The GPU spins before each call so the host has queued it by the start event: host overhead is not counted."""
    import torch

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(200_000)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return float(np.median(times))


# ---- one program per scalar op and dtype ------------------------------------------------------------------------
_POSITIVE = {"log", "log2", "log1p", "sqrt", "rsqrt", "pow"}


# Ops whose checks also take NaNs and -inf (their CUDA has its own NaN and flush handling).
_SPECIALS = ("maximum", "minimum", "exp_flush", "exp_sub_flush")


def scalar_op_program(name: str, dtype: str, n: int = 256) -> tuple[str, list[np.ndarray]] | None:
    """IR applying scalar op `name` to `n` elements of `dtype` (None where the op does not take the dtype), with
    inputs chosen inside its domain."""
    o = SCALAR_OPS[name]
    t = ScalarType(dtype)
    rng = np.random.default_rng(zlib.crc32(f"{name}.{dtype}".encode()))
    if o.kind == "math" and not t.is_float:
        return None
    if o.kind == "logic" and t.is_float:
        return None
    if dtype == "bool" and o.kind not in ("logic", "compare"):
        return None  # numpy has no arithmetic on bools to compare with
    if o.kind == "select":
        return _select_program(t, n, rng)
    if o.kind == "cast":
        return None  # `cast_program`: the target type is a second parameter
    if t.is_float:
        if name in _POSITIVE:
            a = rng.uniform(0.1, 4.0, n)
            b = rng.uniform(-2.0, 2.0, n)
        else:
            a, b = rng.standard_normal(n) * 3, rng.standard_normal(n) * 3
        a[:4] = [0.0, -0.0, 2.5, -2.5] if name not in _POSITIVE else a[:4]
        if name in _SPECIALS:  # NaN on either side, and results below the smallest normal float
            a[4:8], b[4:8] = [np.nan, -100.0, 1.0, -np.inf], [1.0, np.nan, np.nan, 0.0]
    else:
        a = rng.integers(-20, 21, n)
        b = rng.integers(1, 8, n) * rng.choice([-1, 1], n)
        if dtype == "u8":
            a, b = np.abs(a), np.abs(b)
    ins = [quantize(a, t), quantize(b, t)][: o.arity]
    rt = o.result_type([t] * o.arity)
    args = ", ".join(f"%v{k}" for k in range(o.arity))
    loads = "".join(f"  %v{k} = kernel.load %in{k}[%i] : {dtype}\n" for k in range(o.arity))
    params = ", ".join(f"%in{k}: !kernel.ptr<{dtype}>" for k in range(o.arity))
    fargs = ", ".join(f"%in{k}: {dtype}[{n}]" for k in range(o.arity))
    ins_names = ", ".join(f"%in{k}" for k in range(o.arity))
    ir = f"""kernel.func @k_{name}_{dtype}({params}, %y: !kernel.ptr<{rt}>) grid({n // 64}) block(64) {{
  %t = kernel.thread_id x
  %b = kernel.block_id x
  %i = kernel.index %b * 64 + %t
{loads}  %r = kernel.{name} {args} : {rt}
  kernel.store %r, %y[%i]
}}
func.func @forward({fargs}) -> {rt}[{n}] {{
  %y = kernel.alloc : {rt}[{n}]
  kernel.launch @k_{name}_{dtype}({ins_names}, %y)
  func.return %y
}}
"""
    return ir, ins


def _select_program(t: ScalarType, n: int, rng) -> tuple[str, list[np.ndarray]]:
    d = t.name
    ins = [quantize(rng.standard_normal(n) * 3, t), quantize(rng.standard_normal(n) * 3, t)]
    params = f"%in0: !kernel.ptr<{d}>, %in1: !kernel.ptr<{d}>, %y: !kernel.ptr<{d}>"
    ir = f"""kernel.func @k_select_{d}({params}) grid({n // 64}) block(64) {{
  %t = kernel.thread_id x
  %b = kernel.block_id x
  %i = kernel.index %b * 64 + %t
  %v0 = kernel.load %in0[%i] : {d}
  %v1 = kernel.load %in1[%i] : {d}
  %c = kernel.lt %v0, %v1 : bool
  %r = kernel.select %c, %v0, %v1 : {d}
  kernel.store %r, %y[%i]
}}
func.func @forward(%in0: {d}[{n}], %in1: {d}[{n}]) -> {d}[{n}] {{
  %y = kernel.alloc : {d}[{n}]
  kernel.launch @k_select_{d}(%in0, %in1, %y)
  func.return %y
}}
"""
    return ir, ins


def cast_program(src: str, dst: str, n: int = 256) -> tuple[str, list[np.ndarray]]:
    """IR casting `n` elements of `src` to `dst` (values include halves, negatives and zeros)."""
    rng = np.random.default_rng(zlib.crc32(f"cast.{src}.{dst}".encode()))
    # Values every integer type holds: out-of-range float-to-integer conversions differ (CUDA saturates, numpy
    # wraps) and are not what this checks.
    x = np.clip(np.round(rng.standard_normal(n) * 40, 1), -100, 100)
    x[:6] = [0.0, 0.5, 1.5, -2.5, 100.0, -3.0]
    if "u8" in (src, dst):
        x = np.abs(x)
    ins = [quantize(x, ScalarType(src))]
    params = f"%in0: !kernel.ptr<{src}>, %y: !kernel.ptr<{dst}>"
    ir = f"""kernel.func @k_cast_{src}_{dst}({params}) grid({n // 64}) block(64) {{
  %t = kernel.thread_id x
  %b = kernel.block_id x
  %i = kernel.index %b * 64 + %t
  %v = kernel.load %in0[%i] : {src}
  %r = kernel.cast %v : {src} to {dst}
  kernel.store %r, %y[%i]
}}
func.func @forward(%in0: {src}[{n}]) -> {dst}[{n}] {{
  %y = kernel.alloc : {dst}[{n}]
  kernel.launch @k_cast_{src}_{dst}(%in0, %y)
  func.return %y
}}
"""
    return ir, ins


def check_scalar_op(name: str, dtype: str, target: str | None = None) -> Check | None:
    """The GPU's answer for one scalar op and dtype (and target type, for cast) against the kernel simulator's."""
    from irforge.dialects.kernel.simulator import run
    from irforge.parser import parse_module

    from .executor import Executor

    prog = cast_program(dtype, target) if name == "cast" else scalar_op_program(name, dtype)
    if prog is None:
        return None
    ir, ins = prog
    (want,) = run(parse_module(ir), ins)
    (got,) = Executor(lower(ir), sync_each=True)(*ins)
    got = to_numpy(got)
    label = f"{name}.{dtype}" + (f".{target}" if target else "")
    out_t = ScalarType(target) if target else None
    same_nan = np.array_equal(np.isnan(got.astype(np.float64)), np.isnan(want.astype(np.float64)))
    if not same_nan:
        return Check(label, False, detail="NaNs differ from the simulator")
    g, w = np.nan_to_num(got.astype(np.float64)), np.nan_to_num(want.astype(np.float64))
    if (out_t or ScalarType(dtype)).is_float and SCALAR_OPS[name].kind != "compare":
        # f32: a few ulps of libm difference; halves: one rounding step of the result.
        tol = 1e-5 if dtype in ("f32", "f64") else 8e-3
        err = float(np.max(np.abs(g - w) / np.maximum(np.abs(w), 1e-3)))
        return Check(label, err <= tol, err)
    bad = int((g != w).sum())
    return Check(label, bad == 0, float(bad), "" if bad == 0 else f"{bad} elements differ")


DTYPES = ("f32", "bf16", "f16", "f64", "i32", "i64", "i8", "u8", "bool")


def all_scalar_checks() -> list[Check]:
    """Every scalar op on every dtype it takes, and every cast between the dtypes, on the GPU vs the simulator."""
    out = []
    for name in SCALAR_OPS:
        if name == "cast":
            out += [check_scalar_op("cast", s, d) for s in DTYPES for d in DTYPES if s != d]
            continue
        for dtype in DTYPES:
            c = check_scalar_op(name, dtype)
            if c is not None:
                out.append(c)
    return out
