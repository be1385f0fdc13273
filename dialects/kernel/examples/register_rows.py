"""RMSNorm and softmax with each row held in registers: one read of the input, one write of the output (their
inputs and references are `reductions.py`'s)."""

from __future__ import annotations

from .base import Example, _header, _vec
from .reductions import _block_combine_partials, _butterfly, rms_norm, softmax


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
