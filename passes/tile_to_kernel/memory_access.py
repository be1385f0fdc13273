"""lower-to-kernel's rules for loads and stores of register tiles: one strided tile access each."""

from __future__ import annotations

import math
from dataclasses import dataclass

from irforge.dialects import tile as T
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel.builder import Val
from irforge.dialects.kernel.types import SmemType
from irforge.dialects.loop.indexing import multiple_of
from irforge.dialects.tile import vectors
from irforge.dialects.tile.columns import varies, writer_axes

from irforge import index_expr as ix
from irforge.ir import Operation, Value
from irforge.types import TensorType, index

from . import combines
from .emit import value_hint
from .swizzle_runs import xor_runs


# ---- loads and stores --------------------------------------------------------------------------------------------
@dataclass
class Pattern:
    """What one access of a tile-level load or store moves, known at the tile level: the tile it reaches over the
    lane dimensions around it, and how it moves as vectors."""

    shape: tuple  # the access's tile shape (split lane dimensions as two)
    strides: tuple  # element strides of the tile's dimensions in the memory
    lanes: tuple  # the tile shape over the lane context (what the value is)
    offset: ix.IndexExpr  # lane 0's element offset in the memory, over tile values (for alignment proofs)
    width: int | None  # elements per vector along the run dimension (None: the whole run)


def pattern(op, lanes, mem) -> Pattern:
    """The access `op` makes in `mem` (a global buffer's tensor type, or one slot of a staged box's shared memory,
    rows padded and swizzled), in the lane context `lanes` (`vectors.loop_lanes(op)`)."""
    smem = isinstance(mem, SmemType)
    row_strides = mem.strides if smem else K.default_strides(mem.shape)
    exprs = [vectors.expand(e) for e in op.index_exprs()]
    offset: ix.IndexExpr = ix.Const(0)
    for e, s in zip(exprs, row_strides):
        offset = offset + e * s
    shape, strides, lane_shape = [], [], []
    for ld in lanes:
        c = ld.stride(offset)
        if c == 0:
            shape.append(1)
            strides.append(0)
            lane_shape.append(1)
            continue
        lane_shape.append(ld.size)
        groups = ld.loop.layout.split[ld.dim]
        if groups > 1:
            run = ld.size // groups
            shape += [groups, run]
            strides += [c * ld.loop.layout.group_stride(ld.dim), c]
        else:
            shape.append(ld.size)
            strides.append(c)
    p = Pattern(tuple(shape), tuple(strides), tuple(lane_shape), offset, None)
    p.width = _vector_width(p, mem.dtype, lanes, swizzle_unit(mem) if smem else None, mem.shape[-1] if smem else None)
    return p


def _vector_width(p: Pattern, dtype, lanes, unit: int | None, row: int | None) -> int | None:
    """Elements per vector access along the run dimension: the whole run where the offsets are provably aligned to
    it, fewer where they are not (None: the whole run). Lane 0 of a lane dimension sits at a multiple of its
    group's length. In a swizzled memory a vector stays inside one swizzle unit: at most `unit` elements, starting
    at a multiple of its length; in shared memory, inside a row of `row` elements (rows may be padded)."""
    known = vectors.aligned(lanes)
    d = K.run_dim(p.shape, p.strides)
    if d is None:
        return None
    nbytes = dtype.bytes
    run = p.shape[d]
    row = row or run
    w = run
    while w > 1:
        size = w * nbytes
        legal = (size <= 16 and size & (size - 1) == 0) or size % 16 == 0
        align = min(size, 16) // nbytes
        if unit is not None:
            legal = legal and w <= unit
            align = w
        aligned = multiple_of(p.offset, align, known) and all(s % align == 0 for k, s in enumerate(p.strides) if k != d)
        if legal and aligned and run % w == 0 and row % w == 0:
            break
        w //= 2
    return None if w == run else w


@dataclass
class Access:
    mem: Value
    base: list  # kernel-level index expressions of lane 0
    pattern: Pattern
    dtype: object
    xor_runs: bool = False  # its runs' swizzled addresses are lane 0's XOR constants (swizzle_runs.py)


def swizzle_unit(t: SmemType) -> int | None:
    """Elements a swizzle of `t` keeps together (2^M), None when it has none."""
    return 1 << t.swizzle[1] if t.swizzle else None


def _access(m, op) -> Access:
    src = op.operands[0]
    if src in m.ptr:
        p = pattern(op, m.lanes, src.type)
        return Access(m.ptr[src], [m.kexpr(vectors.flat_offset(op))], p, src.type.dtype)
    st = m.staged[src]
    t = st.smem.type
    p = pattern(op, m.lanes, SmemType(t.dtype, t.shape[1:], t.swizzle) if st.ring > 1 else t)
    base = [m.kexpr(vectors.expand(e)) for e in op.index_exprs()]
    if st.ring > 1:
        base = [Val(st.slot), *base]  # whole rings apart: slots keep the alignment
    slot = (st.ring, math.prod(t.shape[1:])) if st.ring > 1 else None
    xor = bool(t.swizzle) and xor_runs(p.offset, p.shape, p.strides, p.width, t.dtype, m.lanes, slot)
    return Access(st.smem, base, p, t.dtype, xor)


def _tile_access(m, op, a: Access, value: Value | None = None):
    """Load (value None) or store one tile access."""
    kb = m.kb
    p = a.pattern
    if not any(n > 1 for n in p.shape):
        if value is None:
            return kb.load(a.mem, a.base, a.dtype, _hint(op))
        return kb.store(value, a.mem, a.base)
    t = TensorType(a.dtype, p.shape)
    attrs = {"strides": p.strides} if p.strides != K.default_strides(p.shape) else {}
    if p.width is not None:
        attrs["vector"] = p.width
    if a.xor_runs:
        attrs["xor_runs"] = True
    if value is None:
        r = kb.load(a.mem, a.base, t, _hint(op))
        r.owner.attributes.update(attrs)
        return r if p.shape == p.lanes else kb.reshape(r, TensorType(a.dtype, p.lanes))
    if value.type != t:
        value = kb.reshape(value, t)
    st = kb.store(value, a.mem, a.base)
    st.attributes.update(attrs)
    return st


def _hint(op) -> str | None:
    return value_hint(op.results[0]) if op.results else None


def load(m, op: T.LoadOp) -> None:
    m.env[op.result] = _tile_access(m, op, _access(m, op))


def store(m, op: T.StoreOp) -> None:
    kb = m.kb
    a = _access(m, op)
    affine = m.affine.get(op.value)
    if affine is not None:
        _add_share(m, op, a, affine)
        return
    value = m.get(op.value)
    want = TensorType(a.dtype, a.pattern.lanes) if any(n > 1 for n in a.pattern.lanes) else a.dtype
    if value.type != want:
        value = _as_lanes(kb, value, want)
    cond, axes = single_writer(m, op)
    for extra in (_row_writer(m, op), _real_lane(m, op)):
        if extra is not None:
            cond = extra if cond is None else kb.scalar("and", cond, extra)
    if cond is None:
        _tile_access(m, op, a, value)
        return
    with kb.if_(cond, single_writer=axes) as br, br.then():
        _tile_access(m, op, a, value)


def _add_share(m, op: T.StoreOp, a: Access, affine) -> None:
    """A store of a value affine in a cross-block partial: every block adds its share (no single writer along the
    combine's axis) into the buffer, which a kernel launched before zeroes; the first block then adds the constant
    part."""
    if op.buffer not in m.zeroed:
        m.zeroed.append(op.buffer)
    _atomic_add(m, op, a, combines.contribution(m, affine))
    combines.constant_share(m, affine, m.atomic_axis, lambda const: _atomic_add(m, op, a, const))


def _atomic_add(m, op: T.StoreOp, a: Access, value: Value) -> None:
    kb = m.kb
    p = a.pattern
    lanes = TensorType(a.dtype, p.lanes) if any(n > 1 for n in p.lanes) else a.dtype
    if value.type != lanes:
        value = _as_lanes(kb, value, lanes)
    if isinstance(lanes, TensorType) and p.shape != p.lanes:
        value = kb.reshape(value, TensorType(a.dtype, p.shape))
    strides = p.strides if isinstance(lanes, TensorType) else None
    cond, axes = single_writer(m, op, skip=m.atomic_axis)
    if cond is None:
        kb.atomic("add", value, a.mem, a.base, strides)
        return
    with kb.if_(cond, single_writer=axes) as br, br.then():
        kb.atomic("add", value, a.mem, a.base, strides)


def _row_writer(m, op: T.StoreOp) -> Value | None:
    """On a tensor-core atom's layout the four lanes `lane % 4` share each row: a store whose place and value do not
    vary along the tile's columns (a row's carrier, as a split's partials store it) is the first one's."""
    loop = next((lp for lp in T.enclosing_loops(op) if isinstance(lp, T.ForOp) and "atom" in lp.attributes), None)
    if loop is None or any(varies(v, loop.ivs[1], set()) for v in op.operands):
        return None
    kb = m.kb
    quad = kb.index(Val(m.trip[loop]) % 4, "quad_lane")
    return kb.scalar("eq", quad, kb.const(0, index))


def _real_lane(m, op: T.StoreOp) -> Value | None:
    """In an atom loop whose last lanes hold ghost rows (a few rows on the atoms' top half), a store is a real
    lane's."""
    loop = next((lp for lp in T.enclosing_loops(op) if lp in m.ghost_lanes), None)
    if loop is None:
        return None
    return m.kb.scalar("lt", m.trip[loop], m.kb.const(m.ghost_lanes[loop], index))


def _as_lanes(kb, value: Value, want) -> Value:
    """A stored value as the access's lanes: a tile of as many elements reshaped (its unit dimensions dropped: an
    accumulator's top half holds one row a lane; a row's carrier is a [1, 1] tile there), anything else
    broadcast."""
    t = value.type
    if isinstance(t, TensorType) and math.prod(t.shape) == math.prod(getattr(want, "shape", ())):
        return kb.reshape(value, want) if isinstance(want, TensorType) else kb.extract(value, (0,) * len(t.shape))
    return kb.splat(value, want)


def single_writer(m, op: Operation, skip: str | None = None) -> tuple[Value | None, tuple[str, ...]]:
    """The condition under which this thread performs a store at `op` (None: every thread that reaches it), and the
    axes it stores for (the simulator checks their threads agree); `skip`: an axis whose every unit stores (adding
    its share)."""
    bound = (writer_axes(op) if isinstance(op, T.StoreOp) else T.bound_axes(op)) | {skip}
    cond, axes = None, ()
    for a in T.AXES:
        if a not in bound and m.tk.axis_size(a) > 1:
            first = m.kb.scalar("eq", m.axis(a), m.kb.const(0, index))
            cond = first if cond is None else m.kb.scalar("and", cond, first)
            axes += (a,)
    return cond, axes
