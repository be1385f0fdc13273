"""Hand-written kernel-level programs with numpy references, at any size.

They exercise every family of kernel ops (vector accesses, strided loops with carries, shuffles, shared-memory trees,
the online-softmax carrier, cp.async double buffering, TMA + mbarrier, mma fragments) and serve three users: the
simulator tests (tiny sizes), the CUDA emitter tests (NVRTC compiles each), and the GPU smoke script and
memory-bound benchmarks (real sizes, compared with torch). Each builder returns an `Example`: the IR text, an input
generator and a float64 reference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from irforge.scalar_ops import quantize
from irforge.types import ScalarType


@dataclass
class Example:
    name: str
    ir: str
    make_inputs: Callable  # rng -> list of numpy arrays (bf16 values held in float32)
    reference: Callable  # inputs -> list of float64 arrays
    rtol: float  # tolerance on ||out - ref|| / ||ref||
    bytes_moved: int  # each input read once, each output written once
    torch_reference: Callable | None = None  # torch tensors -> torch tensors, for GPU comparisons and benchmarks


def _rand(rng, shape, dtype: str, scale: float = 1.0) -> np.ndarray:
    return quantize((rng.standard_normal(shape) * scale).astype(np.float32), ScalarType(dtype))


def _tol(dtype: str) -> float:
    return 1e-5 if dtype == "f32" else 1e-2


def _vec(dtype: str) -> int:
    """Elements in a 16-byte vector access."""
    return 16 // ScalarType(dtype).bytes


def _to_f32(name: str, v: str, dtype: str, n: int) -> tuple[str, str]:
    """IR casting tile `v` of `n` `dtype` elements to f32 (nothing for f32): (lines, name of the f32 tile)."""
    if dtype == "f32":
        return "", v
    return f"  %{name} = kernel.cast %{v} : {dtype}[{n}] to f32[{n}]\n", name


def _from_f32(name: str, v: str, dtype: str, n: int) -> tuple[str, str]:
    if dtype == "f32":
        return "", v
    return f"  %{name} = kernel.cast %{v} : f32[{n}] to {dtype}[{n}]\n", name


def _header(name: str, params: list[str], grid: str, block: str) -> str:
    return f"kernel.func @{name}({', '.join(params)}) grid({grid}) block({block})"


# ---- elementwise -----------------------------------------------------------------------------------------------
def vector_add(n: int, dtype: str = "f32", block: int = 128) -> Example:
    """c = a + b with 16-byte vector loads, one vector per thread."""
    v = _vec(dtype)
    per_block = block * v
    assert n % per_block == 0, f"n must be a multiple of {per_block}"
    ca, a32 = _to_f32("a32", "x", dtype, v)
    cb, b32 = _to_f32("b32", "y", dtype, v)
    cs, s_out = _from_f32("s_out", "s", dtype, v)
    head = _header(
        "k_vector_add",
        [f"%a: !kernel.ptr<{dtype}>", f"%b: !kernel.ptr<{dtype}>", f"%c: !kernel.ptr<{dtype}>"],
        f"{n // per_block}",
        f"{block}",
    )
    ir = f"""{head} {{
  %t = kernel.thread_id x
  %blk = kernel.block_id x
  %i = kernel.index %blk * {per_block} + %t * {v}
  %x = kernel.load %a[%i] : {dtype}[{v}]
  %y = kernel.load %b[%i] : {dtype}[{v}]
{ca}{cb}  %s = kernel.add %{a32}, %{b32} : f32[{v}]
{cs}  kernel.store %{s_out}, %c[%i]
}}
func.func @forward(%a: {dtype}[{n}], %b: {dtype}[{n}]) -> {dtype}[{n}] {{
  %c = kernel.alloc : {dtype}[{n}]
  kernel.launch @k_vector_add(%a, %b, %c)
  func.return %c
}}
"""
    return Example(
        f"vector_add_{dtype}",
        ir,
        lambda rng: [_rand(rng, (n,), dtype), _rand(rng, (n,), dtype)],
        lambda ins: [ins[0].astype(np.float64) + ins[1].astype(np.float64)],
        _tol(dtype),
        3 * n * ScalarType(dtype).bytes,
        lambda a, b: [a + b],
    )


def silu_mul(rows: int, cols: int, dtype: str = "f32", block: int = 256) -> Example:
    """out = silu(g) * u (the SwiGLU gate), elementwise over [rows, cols], 16-byte vectors, math in f32."""
    v = _vec(dtype)
    n = rows * cols
    per_block = block * v
    assert n % per_block == 0, f"rows * cols must be a multiple of {per_block}"
    cg, g32 = _to_f32("g32", "g", dtype, v)
    cu, u32 = _to_f32("u32", "u", dtype, v)
    co, o_out = _from_f32("o_out", "o", dtype, v)
    head = _header(
        "k_silu_mul",
        [f"%gate: !kernel.ptr<{dtype}>", f"%up: !kernel.ptr<{dtype}>", f"%out: !kernel.ptr<{dtype}>"],
        f"{n // per_block}",
        f"{block}",
    )
    ir = f"""{head} {{
  %t = kernel.thread_id x
  %blk = kernel.block_id x
  %i = kernel.index %blk * {per_block} + %t * {v}
  %g = kernel.load %gate[%i] : {dtype}[{v}]
  %u = kernel.load %up[%i] : {dtype}[{v}]
{cg}{cu}  %sg = kernel.sigmoid %{g32} : f32[{v}]
  %silu = kernel.mul %{g32}, %sg : f32[{v}]
  %o = kernel.mul %silu, %{u32} : f32[{v}]
{co}  kernel.store %{o_out}, %out[%i]
}}
func.func @forward(%gate: {dtype}[{rows},{cols}], %up: {dtype}[{rows},{cols}]) -> {dtype}[{rows},{cols}] {{
  %out = kernel.alloc : {dtype}[{rows},{cols}]
  kernel.launch @k_silu_mul(%gate, %up, %out)
  func.return %out
}}
"""

    def ref(ins):
        g, u = (x.astype(np.float64) for x in ins)
        return [g / (1.0 + np.exp(-g)) * u]

    def torch_ref(g, u):
        import torch

        return [torch.nn.functional.silu(g) * u]

    return Example(
        f"silu_mul_{dtype}",
        ir,
        lambda rng: [_rand(rng, (rows, cols), dtype), _rand(rng, (rows, cols), dtype)],
        ref,
        _tol(dtype),
        3 * n * ScalarType(dtype).bytes,
        torch_ref,
    )


# ---- reductions ------------------------------------------------------------------------------------------------
def _butterfly(prefix: str, value: str, op: str = "add", width: int = 32) -> tuple[str, str]:
    """IR for a warp butterfly combining `value` over `width` lanes with scalar op `op`; (lines, result name)."""
    lines, cur, off = [], value, width // 2
    while off >= 1:
        lines.append(f"  %{prefix}_o{off} = kernel.shfl_xor %{cur}, {off} : f32")
        lines.append(f"  %{prefix}_{off} = kernel.{op} %{cur}, %{prefix}_o{off} : f32")
        cur, off = f"{prefix}_{off}", off // 2
    return "\n".join(lines) + "\n", cur


def row_sum(rows: int, cols: int, block: int = 128) -> Example:
    """y[r] = sum(x[r, :]): strided loop, warp shuffles, then a shared-memory tree over the warps' partials."""
    nw = block // 32
    assert block % 32 == 0 and nw & (nw - 1) == 0, "block must be a power-of-two number of warps"
    bf, total = _butterfly("ws", "acc")
    tree = []
    s = nw // 2
    while s >= 1:
        tree.append(f"""  %c{s} = kernel.const {s} : index
  %lt{s} = kernel.lt %t, %c{s} : bool
  kernel.if %lt{s} {{
    %p{s}a = kernel.load %partial[%t] : f32
    %p{s}b = kernel.load %partial[%t + {s}] : f32
    %p{s} = kernel.add %p{s}a, %p{s}b : f32
    kernel.store %p{s}, %partial[%t]
  }}
  kernel.barrier""")
        s //= 2
    tree_ir = "\n".join(tree)
    head = _header("k_row_sum", ["%x: !kernel.ptr<f32>", "%y: !kernel.ptr<f32>"], f"{rows}", f"{block}")
    ir = f"""{head} {{
  %partial = kernel.smem f32[{nw}]
  %t = kernel.thread_id x
  %row = kernel.block_id x
  %lane = kernel.lane_id
  %warp = kernel.warp_id
  %zero = kernel.const 0.0 : f32
  %acc = kernel.for %j in %t .. {cols} step {block} carry(%a <- %zero : f32) {{
    %v = kernel.load %x[%row * {cols} + %j] : f32
    %a2 = kernel.add %a, %v : f32
    kernel.yield %a2
  }}
{bf}  %c0 = kernel.const 0 : index
  %first_lane = kernel.eq %lane, %c0 : bool
  kernel.if %first_lane {{
    kernel.store %{total}, %partial[%warp]
  }}
  kernel.barrier
{tree_ir}
  %first = kernel.eq %t, %c0 : bool
  kernel.if %first {{
    %sum = kernel.load %partial[0] : f32
    kernel.store %sum, %y[%row]
  }}
}}
func.func @forward(%x: f32[{rows},{cols}]) -> f32[{rows}] {{
  %y = kernel.alloc : f32[{rows}]
  kernel.launch @k_row_sum(%x, %y)
  func.return %y
}}
"""
    return Example(
        "row_sum",
        ir,
        lambda rng: [_rand(rng, (rows, cols), "f32")],
        lambda ins: [ins[0].astype(np.float64).sum(axis=1)],
        1e-5,
        4 * rows * (cols + 1),
        lambda x: [x.sum(dim=1)],
    )


def _block_combine_partials(nw: int) -> str:
    """IR summing the warps' partials (every thread reads all of them after the barrier)."""
    return f"""  %zero_p = kernel.const 0.0 : f32
  %total = kernel.for %k in 0 .. {nw} carry(%tp <- %zero_p : f32) {{
    %pk = kernel.load %partial[%k] : f32
    %tp2 = kernel.add %tp, %pk : f32
    kernel.yield %tp2
  }}
"""


def rms_norm(rows: int, cols: int, dtype: str = "f32", block: int = 256, eps: float = 1e-6) -> Example:
    """y = x * rsqrt(mean(x^2) + eps) * w, one block per row, 16-byte vectors, f32 math."""
    v = _vec(dtype)
    nw = block // 32
    assert cols % (block * v) == 0, f"cols must be a multiple of {block * v}"
    cx, x32 = _to_f32("x32", "xv", dtype, v)
    cx2, x2_32 = _to_f32("x2_32", "xv2", dtype, v)
    cw, w32 = _to_f32("w32", "wv", dtype, v)
    co, o_out = _from_f32("o_out", "o", dtype, v)
    bf, total = _butterfly("ws", "sq_sum")
    head = _header(
        "k_rms_norm",
        [f"%x: !kernel.ptr<{dtype}>", f"%w: !kernel.ptr<{dtype}>", f"%y: !kernel.ptr<{dtype}>"],
        f"{rows}",
        f"{block}",
    )
    ir = f"""{head} {{
  %partial = kernel.smem f32[{nw}]
  %t = kernel.thread_id x
  %row = kernel.block_id x
  %lane = kernel.lane_id
  %warp = kernel.warp_id
  %zeros = kernel.const 0.0 : f32[{v}]
  %sq = kernel.for %j in %t * {v} .. {cols} step {block * v} carry(%acc <- %zeros : f32[{v}]) {{
    %xv = kernel.load %x[%row * {cols} + %j] : {dtype}[{v}]
{_indent(cx)}    %x_sq = kernel.mul %{x32}, %{x32} : f32[{v}]
    %acc2 = kernel.add %acc, %x_sq : f32[{v}]
    kernel.yield %acc2
  }}
  %sq_sum = kernel.reduce add %sq : f32[{v}]
{bf}  %c0 = kernel.const 0 : index
  %first_lane = kernel.eq %lane, %c0 : bool
  kernel.if %first_lane {{
    kernel.store %{total}, %partial[%warp]
  }}
  kernel.barrier
{_block_combine_partials(nw)}  %n = kernel.const {float(cols)} : f32
  %mean = kernel.div %total, %n : f32
  %eps = kernel.const {eps} : f32
  %var_eps = kernel.add %mean, %eps : f32
  %rstd = kernel.rsqrt %var_eps : f32
  kernel.for %j2 in %t * {v} .. {cols} step {block * v} {{
    %xv2 = kernel.load %x[%row * {cols} + %j2] : {dtype}[{v}]
    %wv = kernel.load %w[%j2] : {dtype}[{v}]
{_indent(cx2)}{_indent(cw)}    %normed = kernel.mul %{x2_32}, %rstd : f32[{v}]
    %o = kernel.mul %normed, %{w32} : f32[{v}]
{_indent(co)}    kernel.store %{o_out}, %y[%row * {cols} + %j2]
  }}
}}
func.func @forward(%x: {dtype}[{rows},{cols}], %w: {dtype}[{cols}]) -> {dtype}[{rows},{cols}] {{
  %y = kernel.alloc : {dtype}[{rows},{cols}]
  kernel.launch @k_rms_norm(%x, %w, %y)
  func.return %y
}}
"""

    def ref(ins):
        x, w = (a.astype(np.float64) for a in ins)
        return [x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * w]

    def torch_ref(x, w):
        import torch

        return [torch.nn.functional.rms_norm(x, (cols,), w, eps)]

    return Example(
        f"rms_norm_{dtype}",
        ir,
        lambda rng: [_rand(rng, (rows, cols), dtype), _rand(rng, (cols,), dtype)],
        ref,
        _tol(dtype),
        (2 * rows * cols + cols) * ScalarType(dtype).bytes,
        torch_ref,
    )


def _indent(lines: str) -> str:
    return "".join("  " + ln + "\n" for ln in lines.splitlines())


def softmax(rows: int, cols: int, dtype: str = "f32", block: int = 256) -> Example:
    """Row softmax with the online carrier (running max, rescaled sum): one pass to reduce, one to write."""
    v = _vec(dtype)
    nw = block // 32
    assert cols % (block * v) == 0, f"cols must be a multiple of {block * v}"
    cx, x32 = _to_f32("x32", "xv", dtype, v)
    cx2, x2_32 = _to_f32("x2_32", "xv2", dtype, v)
    co, o_out = _from_f32("o_out", "o", dtype, v)
    combine = []
    m, s, off = "m_t", "s_t", 16
    while off >= 1:
        combine.append(f"""  %mo{off} = kernel.shfl_xor %{m}, {off} : f32
  %so{off} = kernel.shfl_xor %{s}, {off} : f32
  %mn{off} = kernel.maximum %{m}, %mo{off} : f32
  %d{off} = kernel.sub %{m}, %mn{off} : f32
  %e{off} = kernel.exp %d{off} : f32
  %do{off} = kernel.sub %mo{off}, %mn{off} : f32
  %eo{off} = kernel.exp %do{off} : f32
  %sa{off} = kernel.mul %{s}, %e{off} : f32
  %sb{off} = kernel.mul %so{off}, %eo{off} : f32
  %sn{off} = kernel.add %sa{off}, %sb{off} : f32""")
        m, s, off = f"mn{off}", f"sn{off}", off // 2
    combine_ir = "\n".join(combine)
    head = _header("k_softmax", [f"%x: !kernel.ptr<{dtype}>", f"%y: !kernel.ptr<{dtype}>"], f"{rows}", f"{block}")
    ir = f"""{head} {{
  %part_m = kernel.smem f32[{nw}]
  %part_s = kernel.smem f32[{nw}]
  %t = kernel.thread_id x
  %row = kernel.block_id x
  %lane = kernel.lane_id
  %warp = kernel.warp_id
  %neg_inf = kernel.const -inf : f32
  %zero = kernel.const 0.0 : f32
  %m_t, %s_t = kernel.for %j in %t * {v} .. {cols} step {block * v} carry(%m <- %neg_inf : f32, %s <- %zero : f32) {{
    %xv = kernel.load %x[%row * {cols} + %j] : {dtype}[{v}]
{_indent(cx)}    %tile_max = kernel.reduce max %{x32} : f32[{v}]
    %m2 = kernel.maximum %m, %tile_max : f32
    %dm = kernel.sub %m, %m2 : f32
    %scale = kernel.exp %dm : f32
    %s_scaled = kernel.mul %s, %scale : f32
    %shifted = kernel.sub %{x32}, %m2 : f32[{v}]
    %ex = kernel.exp %shifted : f32[{v}]
    %ex_sum = kernel.reduce add %ex : f32[{v}]
    %s2 = kernel.add %s_scaled, %ex_sum : f32
    kernel.yield %m2, %s2
  }}
{combine_ir}
  %c0 = kernel.const 0 : index
  %first_lane = kernel.eq %lane, %c0 : bool
  kernel.if %first_lane {{
    kernel.store %{m}, %part_m[%warp]
    kernel.store %{s}, %part_s[%warp]
  }}
  kernel.barrier
  %row_m, %row_s = kernel.for %k in 0 .. {nw} carry(%bm <- %neg_inf : f32, %bs <- %zero : f32) {{
    %pm = kernel.load %part_m[%k] : f32
    %ps = kernel.load %part_s[%k] : f32
    %bm2 = kernel.maximum %bm, %pm : f32
    %db = kernel.sub %bm, %bm2 : f32
    %eb = kernel.exp %db : f32
    %dp = kernel.sub %pm, %bm2 : f32
    %ep = kernel.exp %dp : f32
    %bsa = kernel.mul %bs, %eb : f32
    %bsb = kernel.mul %ps, %ep : f32
    %bs2 = kernel.add %bsa, %bsb : f32
    kernel.yield %bm2, %bs2
  }}
  %inv = kernel.reciprocal %row_s : f32
  kernel.for %j2 in %t * {v} .. {cols} step {block * v} {{
    %xv2 = kernel.load %x[%row * {cols} + %j2] : {dtype}[{v}]
{_indent(cx2)}    %sh = kernel.sub %{x2_32}, %row_m : f32[{v}]
    %e = kernel.exp %sh : f32[{v}]
    %o = kernel.mul %e, %inv : f32[{v}]
{_indent(co)}    kernel.store %{o_out}, %y[%row * {cols} + %j2]
  }}
}}
func.func @forward(%x: {dtype}[{rows},{cols}]) -> {dtype}[{rows},{cols}] {{
  %y = kernel.alloc : {dtype}[{rows},{cols}]
  kernel.launch @k_softmax(%x, %y)
  func.return %y
}}
"""

    def ref(ins):
        x = ins[0].astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return [e / e.sum(axis=1, keepdims=True)]

    def torch_ref(x):
        import torch

        return [torch.softmax(x, dim=-1)]

    return Example(
        f"softmax_{dtype}",
        ir,
        lambda rng: [_rand(rng, (rows, cols), dtype, scale=2.0)],
        ref,
        _tol(dtype),
        2 * rows * cols * ScalarType(dtype).bytes,
        torch_ref,
    )


def _row_vectors(dtype: str, cols: int, block: int) -> tuple[int, int]:
    """(elements per 16-byte vector, vectors per thread) when a block of `block` threads holds a row of `cols`."""
    v = _vec(dtype)
    assert cols % (block * v) == 0, f"cols must be a multiple of {block * v}"
    return v, cols // (block * v)


def _load_row(dtype: str, cols: int, block: int, ptr: str = "x", prefix: str = "x") -> str:
    """IR loading this thread's vectors of row %row (coalesced: vector k of thread t is at t * v + k * block * v),
    each cast to an f32 tile `%{prefix}{k}`."""
    v, k_count = _row_vectors(dtype, cols, block)
    lines = []
    for k in range(k_count):
        raw = f"{prefix}{k}" if dtype == "f32" else f"{prefix}{k}_raw"
        lines.append(f"  %{raw} = kernel.load %{ptr}[%row * {cols} + %t * {v} + {k * block * v}] : {dtype}[{v}]")
        if dtype != "f32":
            lines.append(f"  %{prefix}{k} = kernel.cast %{raw} : {dtype}[{v}] to f32[{v}]")
    return "\n".join(lines) + "\n"


def rms_norm_registers(rows: int, cols: int, dtype: str = "f32", block: int = 256, eps: float = 1e-6) -> Example:
    """RMSNorm holding its row in registers: one read of x, one write of y (block of `block` threads per row)."""
    v, k_count = _row_vectors(dtype, cols, block)
    nw = block // 32
    sq = [f"sq{k}" for k in range(k_count)]
    squares = "".join(f"  %sq{k} = kernel.mul %x{k}, %x{k} : f32[{v}]\n" for k in range(k_count))
    acc, acc_name = _fold("add", sq, "sq_acc", f"f32[{v}]")
    bf, total = _butterfly("ws", "sq_sum")
    outs = []
    for k in range(k_count):
        wraw = f"w{k}" if dtype == "f32" else f"w{k}_raw"
        outs.append(f"  %{wraw} = kernel.load %w[%t * {v} + {k * block * v}] : {dtype}[{v}]")
        if dtype != "f32":
            outs.append(f"  %w{k} = kernel.cast %{wraw} : {dtype}[{v}] to f32[{v}]")
        outs.append(f"  %n{k} = kernel.mul %x{k}, %rstd : f32[{v}]")
        outs.append(f"  %o{k} = kernel.mul %n{k}, %w{k} : f32[{v}]")
        out = f"o{k}"
        if dtype != "f32":
            outs.append(f"  %o{k}_out = kernel.cast %o{k} : f32[{v}] to {dtype}[{v}]")
            out = f"o{k}_out"
        outs.append(f"  kernel.store %{out}, %y[%row * {cols} + %t * {v} + {k * block * v}]")
    params = [f"%x: !kernel.ptr<{dtype}>", f"%w: !kernel.ptr<{dtype}>", f"%y: !kernel.ptr<{dtype}>"]
    head = _header("k_rms_norm", params, f"{rows}", f"{block}")
    ir = f"""{head} {{
  %partial = kernel.smem f32[{nw}]
  %t = kernel.thread_id x
  %row = kernel.block_id x
  %lane = kernel.lane_id
  %warp = kernel.warp_id
{_load_row(dtype, cols, block)}{squares}{acc}  %sq_sum = kernel.reduce add %{acc_name} : f32[{v}]
{bf}  %c0 = kernel.const 0 : index
  %first_lane = kernel.eq %lane, %c0 : bool
  kernel.if %first_lane {{
    kernel.store %{total}, %partial[%warp]
  }}
  kernel.barrier
{_block_combine_partials(nw)}  %n = kernel.const {float(cols)} : f32
  %mean = kernel.div %total, %n : f32
  %eps = kernel.const {eps} : f32
  %var_eps = kernel.add %mean, %eps : f32
  %rstd = kernel.rsqrt %var_eps : f32
{chr(10).join(outs)}
}}
func.func @forward(%x: {dtype}[{rows},{cols}], %w: {dtype}[{cols}]) -> {dtype}[{rows},{cols}] {{
  %y = kernel.alloc : {dtype}[{rows},{cols}]
  kernel.launch @k_rms_norm(%x, %w, %y)
  func.return %y
}}
"""
    base = rms_norm(rows, cols, dtype, block, eps)  # the same function: its inputs and references
    return Example(
        f"rms_norm_registers_{dtype}",
        ir,
        base.make_inputs,
        base.reference,
        base.rtol,
        base.bytes_moved,
        base.torch_reference,
    )


def _fold(op: str, names: list[str], out: str, t: str) -> tuple[str, str]:
    """IR folding `names` left to right with scalar op `op`: (lines, name of the result)."""
    lines, cur = [], names[0]
    for i, n in enumerate(names[1:]):
        nxt = out if i == len(names) - 2 else f"{out}_{i}"
        lines.append(f"  %{nxt} = kernel.{op} %{cur}, %{n} : {t}\n")
        cur = nxt
    return "".join(lines), cur


def softmax_registers(rows: int, cols: int, dtype: str = "f32", block: int = 256) -> Example:
    """Row softmax holding its row in registers: one read, one write. Per thread: max, then the exponentials and
    their sum; across the block, the online carrier (max, sum) combines the threads' pairs."""
    v, k_count = _row_vectors(dtype, cols, block)
    nw = block // 32
    maxes = "".join(f"  %mx{k} = kernel.reduce max %x{k} : f32[{v}]\n" for k in range(k_count))
    m_lines, m_t = _fold("maximum", [f"mx{k}" for k in range(k_count)], "m_t", "f32")
    exps = "".join(
        f"  %d{k} = kernel.sub %x{k}, %{m_t} : f32[{v}]\n  %e{k} = kernel.exp %d{k} : f32[{v}]\n"
        f"  %es{k} = kernel.reduce add %e{k} : f32[{v}]\n"
        for k in range(k_count)
    )
    s_lines, s_t = _fold("add", [f"es{k}" for k in range(k_count)], "s_t", "f32")
    combine, m, s, off = [], m_t, s_t, 16
    while off >= 1:
        combine.append(f"""  %mo{off} = kernel.shfl_xor %{m}, {off} : f32
  %so{off} = kernel.shfl_xor %{s}, {off} : f32
  %mn{off} = kernel.maximum %{m}, %mo{off} : f32
  %da{off} = kernel.sub %{m}, %mn{off} : f32
  %ea{off} = kernel.exp %da{off} : f32
  %db{off} = kernel.sub %mo{off}, %mn{off} : f32
  %eb{off} = kernel.exp %db{off} : f32
  %sa{off} = kernel.mul %{s}, %ea{off} : f32
  %sb{off} = kernel.mul %so{off}, %eb{off} : f32
  %sn{off} = kernel.add %sa{off}, %sb{off} : f32""")
        m, s, off = f"mn{off}", f"sn{off}", off // 2
    outs = []
    for k in range(k_count):
        outs.append(f"  %o{k} = kernel.mul %e{k}, %scale : f32[{v}]")
        out = f"o{k}"
        if dtype != "f32":
            outs.append(f"  %o{k}_out = kernel.cast %o{k} : f32[{v}] to {dtype}[{v}]")
            out = f"o{k}_out"
        outs.append(f"  kernel.store %{out}, %y[%row * {cols} + %t * {v} + {k * block * v}]")
    head = _header("k_softmax", [f"%x: !kernel.ptr<{dtype}>", f"%y: !kernel.ptr<{dtype}>"], f"{rows}", f"{block}")
    ir = f"""{head} {{
  %part_m = kernel.smem f32[{nw}]
  %part_s = kernel.smem f32[{nw}]
  %t = kernel.thread_id x
  %row = kernel.block_id x
  %lane = kernel.lane_id
  %warp = kernel.warp_id
  %neg_inf = kernel.const -inf : f32
  %zero = kernel.const 0.0 : f32
{_load_row(dtype, cols, block)}{maxes}{m_lines}{exps}{s_lines}{chr(10).join(combine)}
  %c0 = kernel.const 0 : index
  %first_lane = kernel.eq %lane, %c0 : bool
  kernel.if %first_lane {{
    kernel.store %{m}, %part_m[%warp]
    kernel.store %{s}, %part_s[%warp]
  }}
  kernel.barrier
  %row_m, %row_s = kernel.for %k in 0 .. {nw} carry(%bm <- %neg_inf : f32, %bs <- %zero : f32) {{
    %pm = kernel.load %part_m[%k] : f32
    %ps = kernel.load %part_s[%k] : f32
    %bm2 = kernel.maximum %bm, %pm : f32
    %dm = kernel.sub %bm, %bm2 : f32
    %em = kernel.exp %dm : f32
    %dp = kernel.sub %pm, %bm2 : f32
    %ep = kernel.exp %dp : f32
    %bsa = kernel.mul %bs, %em : f32
    %bsb = kernel.mul %ps, %ep : f32
    %bs2 = kernel.add %bsa, %bsb : f32
    kernel.yield %bm2, %bs2
  }}
  %inv = kernel.reciprocal %row_s : f32
  %shift = kernel.sub %{m_t}, %row_m : f32
  %rescale = kernel.exp %shift : f32
  %scale = kernel.mul %rescale, %inv : f32
{chr(10).join(outs)}
}}
func.func @forward(%x: {dtype}[{rows},{cols}]) -> {dtype}[{rows},{cols}] {{
  %y = kernel.alloc : {dtype}[{rows},{cols}]
  kernel.launch @k_softmax(%x, %y)
  func.return %y
}}
"""
    base = softmax(rows, cols, dtype, block)  # the same function: its inputs and references
    return Example(
        f"softmax_registers_{dtype}",
        ir,
        base.make_inputs,
        base.reference,
        base.rtol,
        base.bytes_moved,
        base.torch_reference,
    )


# ---- asynchronous copies ---------------------------------------------------------------------------------------
def cp_async_scale(n: int, tiles_per_block: int = 4, block: int = 64, *, second_barrier: bool = True) -> Example:
    """out = 2 * x through a two-stage shared-memory ring filled by cp.async (prefetch tile k + 1 while tile k is
    used); each thread reads what its neighbour copied, so the barriers matter. `second_barrier=False` plants the
    classic bug (the next prefetch overwrites a stage other threads are still reading)."""
    tile = block * 4
    per_block = tile * tiles_per_block
    assert n % per_block == 0, f"n must be a multiple of {per_block}"
    tail = "    kernel.barrier\n" if second_barrier else ""
    head = _header(
        "k_cp_async_scale", ["%x: !kernel.ptr<f32>", "%out: !kernel.ptr<f32>"], f"{n // per_block}", f"{block}"
    )
    ir = f"""{head} {{
  %stage = kernel.smem f32[2,{tile}]
  %t = kernel.thread_id x
  %blk = kernel.block_id x
  %two = kernel.const 2.0 : f32
  kernel.cp_async %x[%blk * {per_block} + %t * 4] -> %stage[0, %t * 4] : f32[4]
  kernel.cp_async_commit
  kernel.for %k in 0 .. {tiles_per_block} {{
    %next = kernel.index %k + 1
    %last = kernel.const {tiles_per_block} : index
    %more = kernel.lt %next, %last : bool
    kernel.if %more {{
      kernel.cp_async %x[%blk * {per_block} + %next * {tile} + %t * 4] -> %stage[%next mod 2, %t * 4] : f32[4]
    }}
    kernel.cp_async_commit
    kernel.cp_async_wait 1
    kernel.barrier
    %src = kernel.index (%t + 1) mod {block}
    %v = kernel.load %stage[%k mod 2, %src * 4] : f32[4]
    %v2 = kernel.mul %v, %two : f32[4]
    kernel.store %v2, %out[%blk * {per_block} + %k * {tile} + %src * 4]
{tail}  }}
}}
func.func @forward(%x: f32[{n}]) -> f32[{n}] {{
  %out = kernel.alloc : f32[{n}]
  kernel.launch @k_cp_async_scale(%x, %out)
  func.return %out
}}
"""
    return Example(
        "cp_async_scale",
        ir,
        lambda rng: [_rand(rng, (n,), "f32")],
        lambda ins: [2.0 * ins[0].astype(np.float64)],
        1e-6,
        8 * n,
        lambda x: [2 * x],
    )


def tma_scale(
    rows: int, cols: int, box_rows: int = 8, box_cols: int = 32, block: int = 64, swizzle: int = 0
) -> Example:
    """out = 2 * x (bf16 in, f32 out): thread 0 asks the copy engine for a box of a 2-D bf16 tensor, every thread
    waits on the mbarrier, then reads the box from shared memory. With `swizzle` (the box's row bytes: 32, 64 or
    128), the copy engine writes the box swizzled and the reads go through the same swizzle."""
    assert rows % box_rows == 0 and cols % box_cols == 0
    box = box_rows * box_cols
    tmap = f"!kernel.tensormap<bf16, [{rows}, {cols}], [{box_rows}, {box_cols}]{f', {swizzle}' if swizzle else ''}>"
    head = _header(
        "k_tma_scale" + (f"_sw{swizzle}" if swizzle else ""),
        [f"%xm: {tmap}", "%out: !kernel.ptr<f32>"],
        f"{cols // box_cols}, {rows // box_rows}",
        f"{block}",
    )
    sw = f" swizzle({(swizzle // 16).bit_length() - 1}, 3, 3)" if swizzle else ""
    ir = f"""{head} {{
  %tile = kernel.smem bf16[{box_rows},{box_cols}]{sw}
  %full = kernel.smem mbarrier[1]
  %t = kernel.thread_id x
  %bx = kernel.block_id x
  %by = kernel.block_id y
  %c0 = kernel.const 0 : index
  %leader = kernel.eq %t, %c0 : bool
  kernel.if %leader {{
    kernel.mbarrier_init %full[0], 1
  }}
  kernel.barrier
  kernel.if %leader {{
    kernel.mbarrier_arrive %full[0] expect_tx {box * 2}
    kernel.tma_load %xm[%by * {box_rows}, %bx * {box_cols}] -> %tile, %full[0]
  }}
  kernel.mbarrier_wait %full[0], parity 0
  %two = kernel.const 2.0 : f32
  kernel.for %e in %t .. {box} step {block} {{
    %v = kernel.load %tile[%e floordiv {box_cols}, %e mod {box_cols}] : bf16
    %f = kernel.cast %v : bf16 to f32
    %f2 = kernel.mul %f, %two : f32
    kernel.store %f2, %out[(%by * {box_rows} + %e floordiv {box_cols}) * {cols} + %bx * {box_cols} + %e mod {box_cols}]
  }}
}}
func.func @forward(%x: bf16[{rows},{cols}]) -> f32[{rows},{cols}] {{
  %out = kernel.alloc : f32[{rows},{cols}]
  kernel.launch @k_tma_scale{f"_sw{swizzle}" if swizzle else ""}(%x, %out)
  func.return %out
}}
"""
    return Example(
        "tma_scale" + (f"_sw{swizzle}" if swizzle else ""),
        ir,
        lambda rng: [_rand(rng, (rows, cols), "bf16")],
        lambda ins: [2.0 * ins[0].astype(np.float64)],
        1e-6,
        rows * cols * (2 + 4),
        lambda x: [2 * x.float()],
    )


# ---- tensor cores ----------------------------------------------------------------------------------------------
def mma_linear(m: int, n: int, k: int, dtype: str = "bf16") -> Example:
    """y = a @ w^T (a: [m, k], w: [n, k] as nn.Linear stores it; f32 result) with mma.sync m16n8k16: one warp per
    16 x 8 output tile, staging 16 x 16 slices of a and 8 x 16 slices of w in shared memory."""
    assert m % 16 == 0 and n % 8 == 0 and k % 16 == 0
    head = _header(
        "k_mma_linear",
        [f"%a: !kernel.ptr<{dtype}>", f"%w: !kernel.ptr<{dtype}>", "%y: !kernel.ptr<f32>"],
        f"{n // 8}, {m // 16}",
        "32",
    )
    ir = f"""{head} {{
  %as = kernel.smem {dtype}[16,16]
  %ws = kernel.smem {dtype}[8,16]
  %lane = kernel.thread_id x
  %tn = kernel.block_id x
  %tm = kernel.block_id y
  %zero = kernel.const 0.0 : !kernel.frag<"acc", f32, [16, 8]>
  %acc = kernel.for %k0 in 0 .. {k} step 16 carry(%c <- %zero : !kernel.frag<"acc", f32, [16, 8]>) {{
    %av = kernel.load %a[(%tm * 16 + %lane floordiv 2) * {k} + %k0 + %lane mod 2 * 8] : {dtype}[8]
    kernel.store %av, %as[%lane floordiv 2, %lane mod 2 * 8]
    %wv = kernel.load %w[(%tn * 8 + %lane floordiv 4) * {k} + %k0 + %lane mod 4 * 4] : {dtype}[4]
    kernel.store %wv, %ws[%lane floordiv 4, %lane mod 4 * 4]
    kernel.barrier
    %fa = kernel.frag_load %as[0, 0] : !kernel.frag<"a", {dtype}, [16, 16]>
    %fb = kernel.frag_load %ws[0, 0] transpose : !kernel.frag<"b", {dtype}, [16, 8]>
    %c2 = kernel.mma %fa, %fb, %c : !kernel.frag<"acc", f32, [16, 8]>
    kernel.barrier
    kernel.yield %c2
  }}
  kernel.frag_store %acc, %y[%tm * {16 * n} + %tn * 8] stride {n}
}}
func.func @forward(%a: {dtype}[{m},{k}], %w: {dtype}[{n},{k}]) -> f32[{m},{n}] {{
  %y = kernel.alloc : f32[{m},{n}]
  kernel.launch @k_mma_linear(%a, %w, %y)
  func.return %y
}}
"""
    return Example(
        f"mma_linear_{dtype}",
        ir,
        lambda rng: [_rand(rng, (m, k), dtype), _rand(rng, (n, k), dtype)],
        lambda ins: [ins[0].astype(np.float64) @ ins[1].astype(np.float64).T],
        1e-5,
        (m * k + n * k) * ScalarType(dtype).bytes + m * n * 4,
        lambda a, w: [(a.float() @ w.float().T)],
    )


def ldmatrix_mma(wm: int, wn: int, k: int, a_t: bool = False, b_t: bool = True, dtype: str = "bf16") -> Example:
    """y = a @ b for one warp's [wm, wn] tile, its fragments loaded with ldmatrix: a stored [wm, k] (or [k, wm] when
    `a_t`), b stored [k, wn] (or [wn, k] when `b_t`, as nn.Linear weights are), both copied whole into shared memory
    first; (wm / 16) x (wn / 8) mma atoms a step of 16 along k."""
    assert wm % 16 == 0 and wn % 8 == 0 and k % 16 == 0
    a_shape, b_shape = ((k, wm) if a_t else (wm, k)), ((wn, k) if b_t else (k, wn))
    fa, fb, acc = (f'!kernel.frag<"a", {dtype}, [{wm}, 16]>', f'!kernel.frag<"b", {dtype}, [16, {wn}]>',
                   f'!kernel.frag<"acc", f32, [{wm}, {wn}]>')  # fmt: skip
    a_at = "[%k0, 0] transpose" if a_t else "[0, %k0]"
    b_at = "[0, %k0] transpose" if b_t else "[%k0, 0]"

    def fill(src: str, dst: str, shape) -> str:
        rows, cols = shape
        return f"""  kernel.for %e_{src} in %lane .. {rows * cols} step 32 {{
    %v_{src} = kernel.load %{src}[%e_{src}] : {dtype}
    kernel.store %v_{src}, %{dst}[%e_{src} floordiv {cols}, %e_{src} mod {cols}]
  }}
"""

    head = _header("k_ldmatrix_mma", [f"%a: !kernel.ptr<{dtype}>", f"%b: !kernel.ptr<{dtype}>", "%y: !kernel.ptr<f32>"],
                   "1", "32")  # fmt: skip
    ir = f"""{head} {{
  %as = kernel.smem {dtype}[{a_shape[0]},{a_shape[1]}]
  %bs = kernel.smem {dtype}[{b_shape[0]},{b_shape[1]}]
  %lane = kernel.thread_id x
{fill("a", "as", a_shape)}{fill("b", "bs", b_shape)}  kernel.barrier
  %zero = kernel.const 0.0 : {acc}
  %d = kernel.for %k0 in 0 .. {k} step 16 carry(%c <- %zero : {acc}) {{
    %fa = kernel.ldmatrix %as{a_at} : {fa}
    %fb = kernel.ldmatrix %bs{b_at} : {fb}
    %c2 = kernel.mma %fa, %fb, %c : {acc}
    kernel.yield %c2
  }}
  kernel.frag_store %d, %y[0] stride {wn}
}}
func.func @forward(%a: {dtype}[{a_shape[0]},{a_shape[1]}], %b: {dtype}[{b_shape[0]},{b_shape[1]}]) -> f32[{wm},{wn}] {{
  %y = kernel.alloc : f32[{wm},{wn}]
  kernel.launch @k_ldmatrix_mma(%a, %b, %y)
  func.return %y
}}
"""

    def reference(ins):
        a, b = (x.astype(np.float64) for x in ins)
        return [(a.T if a_t else a) @ (b.T if b_t else b)]

    tag = ("t" if a_t else "n") + ("t" if b_t else "n")
    return Example(
        f"ldmatrix_mma_{tag}_{dtype}",
        ir,
        lambda rng: [_rand(rng, a_shape, dtype), _rand(rng, b_shape, dtype)],
        reference,
        1e-5,
        (wm * k + wn * k) * ScalarType(dtype).bytes + wm * wn * 4,
        lambda a, b: [(a.float().T if a_t else a.float()) @ (b.float().T if b_t else b.float())],
    )


def _wgmma_chunks(name: str, params: list[str], smem: str, copies: str, tx: int, step: str, n: int, k: int, bk: int,
                  dtype: str, warpgroups: int, inputs: str) -> str:  # fmt: skip
    """A wgmma example's kernel and host function: thread 0 has the copy engine bring each chunk of the K loop into
    shared memory (`copies`, `tx` bytes, into the buffers `smem` declares), every warpgroup runs `step` (its wgmmas
    of the chunk on its 64 rows `%row`, a step `%ks` of 16 at a time, into `%ci`), commits and waits for them before
    the next chunk overwrites the buffers; y [64 * warpgroups, n] in f32."""
    m = 64 * warpgroups
    acc = f'!kernel.frag<"acc", f32, [64, {n}], "wgmma">'
    head = _header(name, [*params, "%y: !kernel.ptr<f32>"], "1", f"{128 * warpgroups}")
    return f"""{head} {{
{smem}  %full = kernel.smem mbarrier[1]
  %t = kernel.thread_id x
  %c0 = kernel.const 0 : index
  %leader = kernel.eq %t, %c0 : bool
  kernel.if %leader {{
    kernel.mbarrier_init %full[0], 1
  }}
  kernel.barrier
  %row = kernel.index %t floordiv 128 * 64
  %zero = kernel.const 0.0 : {acc}
  %d = kernel.for %kc in 0 .. {k // bk} carry(%c <- %zero : {acc}) {{
    kernel.if %leader {{
      kernel.mbarrier_arrive %full[0] expect_tx {tx}
{copies}    }}
    kernel.mbarrier_wait %full[0], parity %kc mod 2
{step.replace("ACC", acc)}    kernel.wgmma_commit
    kernel.wgmma_wait 0
    kernel.barrier
    kernel.yield %c1
  }}
  kernel.frag_store %d, %y[%row * {n}] stride {n}
}}
func.func @forward({inputs}) -> f32[{m},{n}] {{
  %y = kernel.alloc : f32[{m},{n}]
  kernel.launch @{name}({", ".join(i.split(":")[0] for i in inputs.split(", "))}, %y)
  func.return %y
}}
"""


def _swizzle(span: int) -> str:
    """The `!kernel.smem` swizzle the copy engine writes rows of `span` bytes in."""
    return f"swizzle({(span // 16).bit_length() - 1}, 3, 3)"


def wgmma_linear(n: int, k: int, bk: int = 64, dtype: str = "bf16", warpgroups: int = 1) -> Example:
    """y = a @ b.T (a [64 * warpgroups, k], b [n, k] as nn.Linear keeps weights, f32 out) on wgmma: each chunk of
    `bk` columns of both copied into shared memory (rows of 2 * bk bytes, swizzled in that span: the layout the
    descriptors name), every warpgroup fences and issues bk / 16 wgmmas on its 64 rows, both tiles K-major."""
    span, m = 2 * bk, 64 * warpgroups
    ir = _wgmma_chunks(
        f"k_wgmma_linear_{dtype}",
        [f"%am: !kernel.tensormap<{dtype}, [{m}, {k}], [{m}, {bk}], {span}>",
         f"%bm: !kernel.tensormap<{dtype}, [{n}, {k}], [{n}, {bk}], {span}>"],
        f"  %as = kernel.smem {dtype}[{m},{bk}] {_swizzle(span)}\n"
        f"  %bs = kernel.smem {dtype}[{n},{bk}] {_swizzle(span)}\n",
        f"      kernel.tma_load %am[0, %kc * {bk}] -> %as, %full[0]\n"
        f"      kernel.tma_load %bm[0, %kc * {bk}] -> %bs, %full[0]\n",
        (m + n) * span,
        f"""    kernel.wgmma_fence
    %c1 = kernel.for %ks in 0 .. {bk // 16} carry(%ci <- %c : ACC) {{
      %ci2 = kernel.wgmma %as[%row, %ks * 16], %bs[0, %ks * 16], %ci : ACC
      kernel.yield %ci2
    }}
""",
        n, k, bk, dtype, warpgroups, f"%a: {dtype}[{m},{k}], %b: {dtype}[{n},{k}]",
    )  # fmt: skip
    return Example(
        f"wgmma_linear_{dtype}_n{n}_bk{bk}",
        ir,
        lambda rng: [_rand(rng, (m, k), dtype), _rand(rng, (n, k), dtype)],
        lambda ins: [ins[0].astype(np.float64) @ ins[1].astype(np.float64).T],
        1e-5,
        (m * k + n * k) * ScalarType(dtype).bytes + m * n * 4,
        lambda a, b: [a.float() @ b.float().T],
    )


def wgmma_registers_a(n: int, k: int, bk: int = 64, dtype: str = "bf16", warpgroups: int = 1) -> Example:
    """y = a @ v (a [64 * warpgroups, k], v [k, n] row-major, f32 out) on wgmma with A from registers and B
    MN-major, as attention's second product takes exp(x - m) and V: each chunk of `bk` rows of v copied into shared
    memory (rows of 2 * n bytes, swizzled in that span; rows over 128 bytes in blocks of 64 columns, a box each,
    the descriptor's LBO the distance between blocks), every warpgroup loads its A fragment of each step of 16 into
    registers, fences, and issues a wgmma reading v's tile transposed."""
    m, blocks = 64 * warpgroups, max(1, 2 * n // 128)
    cols = n // blocks
    span = 2 * cols
    frag_a = f'!kernel.frag<"a", {dtype}, [64, 16], "wgmma">'
    shape, at = (f"{blocks},{bk},{cols}", "0, ") if blocks > 1 else (f"{bk},{cols}", "")
    copies = "".join(
        f"      kernel.tma_load %vm[%kc * {bk}, {b * cols}] -> %vs{f'[{b}]' if blocks > 1 else ''}, %full[0]\n"
        for b in range(blocks)
    )
    ir = _wgmma_chunks(
        f"k_wgmma_registers_a_{dtype}",
        [f"%a: !kernel.ptr<{dtype}>", f"%vm: !kernel.tensormap<{dtype}, [{k}, {n}], [{bk}, {cols}], {span}>"],
        f"  %vs = kernel.smem {dtype}[{shape}] {_swizzle(span)}\n",
        copies,
        bk * 2 * n,
        f"""    %c1 = kernel.for %ks in 0 .. {bk // 16} carry(%ci <- %c : ACC) {{
      %fa = kernel.frag_load %a[%row * {k} + %kc * {bk} + %ks * 16] stride {k} : {frag_a}
      kernel.wgmma_fence
      %ci2 = kernel.wgmma %fa, %vs[{at}%ks * 16, 0] transpose, %ci : ACC
      kernel.yield %ci2
    }}
""",
        n, k, bk, dtype, warpgroups, f"%a: {dtype}[{m},{k}], %v: {dtype}[{k},{n}]",
    )  # fmt: skip
    return Example(
        f"wgmma_registers_a_{dtype}_n{n}_bk{bk}",
        ir,
        lambda rng: [_rand(rng, (m, k), dtype), _rand(rng, (k, n), dtype)],
        lambda ins: [ins[0].astype(np.float64) @ ins[1].astype(np.float64)],
        1e-5,
        (m * k + k * n) * ScalarType(dtype).bytes + m * n * 4,
        lambda a, v: [a.float() @ v.float()],
    )


def tiny_examples() -> list[Example]:
    """Every example at a size the simulator runs in well under a second each."""
    return [
        vector_add(1024, "f32"),
        vector_add(2048, "bf16"),
        silu_mul(4, 256, "bf16", block=32),
        row_sum(3, 200, block=128),
        rms_norm(2, 512, "f32", block=64),
        rms_norm(2, 1024, "bf16", block=64),
        softmax(2, 512, "f32", block=64),
        softmax(2, 1024, "bf16", block=128),
        rms_norm_registers(3, 256, "f32", block=32),
        rms_norm_registers(2, 256, "bf16", block=32),
        softmax_registers(3, 256, "f32", block=32),
        softmax_registers(2, 512, "bf16", block=32),
        cp_async_scale(1024, tiles_per_block=4, block=64),
        tma_scale(16, 64, box_rows=8, box_cols=32, block=64),
        tma_scale(16, 128, box_rows=8, box_cols=32, block=64, swizzle=64),
        tma_scale(32, 128, box_rows=16, box_cols=64, block=64, swizzle=128),
        mma_linear(32, 16, 48),
        ldmatrix_mma(32, 24, 32, a_t=False, b_t=True),
        ldmatrix_mma(16, 16, 32, a_t=True, b_t=False, dtype="f16"),
        wgmma_linear(16, 128, bk=64),
        wgmma_linear(24, 64, bk=32, dtype="f16"),
        wgmma_linear(8, 32, bk=16, warpgroups=2),
        wgmma_registers_a(64, 128, bk=64),
        wgmma_registers_a(32, 32, bk=16, dtype="f16", warpgroups=2),
        wgmma_registers_a(16, 64, bk=32),
        wgmma_registers_a(128, 32, bk=16),
    ]


def gpu_examples() -> list[Example]:
    """The same kernels at sizes that fill an H100 (for the GPU smoke script)."""
    return [
        vector_add(1 << 24, "f32", block=256),
        vector_add(1 << 24, "bf16", block=256),
        silu_mul(4096, 11008, "bf16"),
        row_sum(4096, 4096, block=256),
        rms_norm(4096, 4096, "f32"),
        rms_norm(4096, 4096, "bf16"),
        softmax(4096, 4096, "f32"),
        softmax(4096, 4096, "bf16"),
        rms_norm_registers(4096, 4096, "f32"),
        rms_norm_registers(4096, 4096, "bf16"),
        softmax_registers(4096, 4096, "f32"),
        softmax_registers(4096, 4096, "bf16"),
        softmax_registers(28 * 2048, 2048, "bf16"),
        cp_async_scale(1 << 22, tiles_per_block=8, block=128),
        tma_scale(4096, 4096, box_rows=32, box_cols=64, block=256),
        tma_scale(4096, 4096, box_rows=32, box_cols=64, block=256, swizzle=128),
        mma_linear(256, 256, 512),
        ldmatrix_mma(64, 64, 256, a_t=False, b_t=True),
        ldmatrix_mma(64, 32, 128, a_t=True, b_t=False, dtype="f16"),
        wgmma_linear(192, 4096, bk=64, warpgroups=2),
        wgmma_linear(128, 1024, bk=32, dtype="f16"),
        wgmma_registers_a(64, 4096, bk=64, warpgroups=2),
        wgmma_registers_a(32, 1024, bk=32, dtype="f16"),
        wgmma_registers_a(128, 4096, bk=64, warpgroups=2),
    ]
