"""Row reductions through a shared-memory tree over the warps' partials: row sum, RMSNorm, and softmax with the
online carrier."""

from __future__ import annotations

import numpy as np

from irforge.types import ScalarType

from .base import Example, _from_f32, _header, _rand, _to_f32, _tol, _vec


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
