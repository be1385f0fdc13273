"""lower-to-kernel's memory rules: loads and stores of register tiles, and stages (shared-memory copies).

A load or store is one kernel access of the tile its subscripts reach over the lane dimensions around it: along
each lane dimension the element offset moves by a constant (the subscripts are linear in the lane indices), so the
access is a strided tile (`kernel.load ... {strides = [...]}`), moved as vectors along its unit-stride dimension
when the offsets are provably aligned to them. A lane dimension in lane groups (`split`) is two tile dimensions
in the access (groups, then lanes), reshaped back.

A stage is a shared-memory buffer filled by all of the block's threads (16-byte pieces where the rows allow),
then a barrier. Its attributes say how: `ring N` keeps N copies used in turn along the enclosing loop (trip k
uses copy k mod N: no barrier is needed before overwriting one); `async` copies with cp.async; `prefetch P`
issues the copy for trip k + P at the start of trip k (after waiting for trip k's own copy and a barrier), the
first P before the loop: the copies of later trips are in flight while this one computes.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

from irforge.dialects import tile as T
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel.builder import Val
from irforge.dialects.kernel.types import SmemType
from irforge.dialects.loop.indexing import multiple_of
from irforge.dialects.tile import vectors

from irforge import index_expr as ix
from irforge.ir import Operation, Value
from irforge.target import target
from irforge.types import TensorType, index

from . import combines
from .emit import strided, value_hint


@dataclass
class Staged:
    """A stage's shared memory: the buffer (`[ring,] *box` with padded rows), and the slot this trip reads."""

    smem: Value
    ring: int
    slot: Value | None = None


# ---- what cannot be materialized -----------------------------------------------------------------------------------
def why_not(kernel: T.KernelOp, op: Operation) -> str | None:
    if not isinstance(op, T.StageOp):
        return None
    if not op.box:
        return "stages a rank-0 buffer; load it directly"
    for lp in T.enclosing_loops(op):
        if any(a in T.THREAD_AXES for a in lp.bind) and set(op.indices) & vectors.depends(lp, lp.ivs):
            return (
                f"stages a box that moves with the block's threads (its subscript uses the index of a loop "
                f"distributed over {', '.join(lp.bind)}); the block's threads copy one box together"
            )
    if op.copy == "async":
        if not target().has("cp.async"):
            return f"copies asynchronously, which {target().arch} cannot (cp.async needs sm_80)"
        if op.copy_width() * op.result.type.dtype.bytes < 4:
            return "copies asynchronously, but its rows do not split into aligned 4-, 8- or 16-byte pieces"
    if op.copy == "tma":
        return "copies with the tensor memory accelerator, which lower-to-kernel does not materialize yet"
    if op.ring > 1 or op.prefetch:
        why = op.why_not_ring()
        if why:
            return why
    if op.prefetch:
        return op.why_not_prefetch()
    return None


# ---- loads and stores --------------------------------------------------------------------------------------------
@dataclass
class Access:
    mem: Value
    base: list  # kernel-level index expressions of lane 0
    shape: tuple  # the access's tile shape (split lane dimensions as two)
    strides: tuple
    lanes: tuple  # the tile shape over the lane context (what the value is)
    dtype: object
    offset: ix.IndexExpr  # lane 0's element offset in the memory, over tile values (for alignment proofs)


def _access(m, op) -> Access:
    src = op.operands[0]
    exprs = [vectors.expand(e) for e in op.index_exprs()]
    if src in m.ptr:
        flat: ix.IndexExpr = ix.Const(0)
        for e, n in zip(exprs, src.type.shape):
            flat = flat * n + e
        coeffs = [vectors.coefficient(flat, ld.iv) for ld in m.lanes]
        mem, base, dtype = m.ptr[src], [m.kexpr(flat)], src.type.dtype
    else:
        st = m.staged[src]
        t = st.smem.type
        rows = t.strides[1:] if st.ring > 1 else t.strides
        coeffs = [sum(vectors.coefficient(e, ld.iv) * s for e, s in zip(exprs, rows)) for ld in m.lanes]
        mem, base, dtype = st.smem, [m.kexpr(e) for e in exprs], t.dtype
        flat = ix.Const(0)
        for e, s in zip(exprs, rows):
            flat = flat + e * s
        if st.ring > 1:
            base = [Val(st.slot), *base]  # whole rings apart: slots keep the alignment
    shape, strides, lanes = [], [], []
    for ld, c in zip(m.lanes, coeffs):
        if c == 0:
            shape.append(1)
            strides.append(0)
            lanes.append(1)
            continue
        lanes.append(ld.size)
        groups = ld.loop.layout.split[ld.dim]
        if groups > 1:
            run = ld.size // groups
            shape += [groups, run]
            strides += [c * ld.loop.layout.group_stride(ld.dim), c]
        else:
            shape.append(ld.size)
            strides.append(c)
    return Access(mem, base, tuple(shape), tuple(strides), tuple(lanes), dtype, flat)


def _vector_width(m, a: Access) -> int | None:
    """Elements per vector access along the run dimension: the whole run where the offsets are provably aligned to
    it, fewer where they are not (None: the whole run). Lane 0 of a lane dimension sits at a multiple of its
    group's length. In shared memory a vector stays inside a row (rows may be padded or swizzled)."""
    known = {ld.iv: ld.loop.layout.groups_len[ld.dim] for ld in m.lanes}
    d = K.run_dim(a.shape, a.strides)
    if d is None:
        return None
    nbytes = a.dtype.bytes
    run = a.shape[d]
    row = a.mem.type.shape[-1] if isinstance(a.mem.type, SmemType) else run
    w = run
    while w > 1:
        size = w * nbytes
        legal = (size <= 16 and size & (size - 1) == 0) or size % 16 == 0
        align = min(size, 16) // nbytes
        aligned = multiple_of(a.offset, align, known) and all(s % align == 0 for k, s in enumerate(a.strides) if k != d)
        if legal and aligned and run % w == 0 and row % w == 0:
            break
        w //= 2
    return None if w == run else w


def _tile_access(m, op, a: Access, value: Value | None = None):
    """Load (value None) or store one tile access."""
    kb = m.kb
    if not any(n > 1 for n in a.shape):
        if value is None:
            return kb.load(a.mem, a.base, a.dtype, _hint(op))
        return kb.store(value, a.mem, a.base)
    t = TensorType(a.dtype, a.shape)
    attrs = {"strides": a.strides} if a.strides != K.default_strides(a.shape) else {}
    width = _vector_width(m, a)
    if width is not None:
        attrs["vector"] = width
    if value is None:
        r = kb.load(a.mem, a.base, t, _hint(op))
        r.owner.attributes.update(attrs)
        return r if a.shape == a.lanes else kb.reshape(r, TensorType(a.dtype, a.lanes))
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
    want = TensorType(a.dtype, a.lanes) if any(n > 1 for n in a.lanes) else a.dtype
    if value.type != want:
        value = kb.splat(value, want)
    cond, axes = single_writer(m, op)
    if cond is None:
        _tile_access(m, op, a, value)
        return
    with kb.if_(cond, single_writer=axes) as br, br.then():
        _tile_access(m, op, a, value)


def _add_share(m, op: T.StoreOp, a: Access, affine) -> None:
    """A store of a value affine in a cross-block partial: every block adds its share (no single writer along the
    combine's axis) into the buffer, which a kernel launched before zeroes."""
    kb = m.kb
    if op.buffer not in m.zeroed:
        m.zeroed.append(op.buffer)
    value = combines.contribution(m, affine, m.atomic_axis)
    lanes = TensorType(a.dtype, a.lanes) if any(n > 1 for n in a.lanes) else a.dtype
    if value.type != lanes:
        value = kb.splat(value, lanes)
    if isinstance(lanes, TensorType) and a.shape != a.lanes:
        value = kb.reshape(value, TensorType(a.dtype, a.shape))
    strides = a.strides if isinstance(lanes, TensorType) else None
    cond, axes = single_writer(m, op, skip=m.atomic_axis)
    if cond is None:
        kb.atomic("add", value, a.mem, a.base, strides)
        return
    with kb.if_(cond, single_writer=axes) as br, br.then():
        kb.atomic("add", value, a.mem, a.base, strides)


def single_writer(m, op: Operation, skip: str | None = None) -> tuple[Value | None, tuple[str, ...]]:
    """The condition under which this thread performs a store at `op` (None: every thread that reaches it), and the
    axes it stores for (the simulator checks their threads agree); `skip`: an axis whose every unit stores (adding
    its share)."""
    bound = T.bound_axes(op) | {skip}
    cond, axes = None, ()
    for a in T.AXES:
        if a not in bound and m.tk.axis_size(a) > 1:
            first = m.kb.scalar("eq", m.axis(a), m.kb.const(0, index))
            cond = first if cond is None else m.kb.scalar("and", cond, first)
            axes += (a,)
    return cond, axes


# ---- stages --------------------------------------------------------------------------------------------------------
def _smem_type(op: T.StageOp) -> SmemType:
    box = op.box
    shape = (*box[:-1], box[-1] + op.attributes.get("pad", 0))
    if op.ring > 1:
        shape = (op.ring, *shape)
    return SmemType(op.result.type.dtype, shape, op.attributes.get("swizzle"))


def _buffer(m, op: T.StageOp) -> Value:
    """The stage's shared memory, made once (a stage in a loop reuses it every trip)."""
    got = m.stage_smem.get(op)
    if got is None:
        name = f"{_value_name(op.source)}_smem"
        got = m.stage_smem[op] = m.smem(_smem_type(op), name)
    return got


def _value_name(v: Value) -> str:
    return value_hint(v) or "buffer"


def stage(m, op: T.StageOp) -> None:
    kb = m.kb
    smem = _buffer(m, op)
    loop = op.parent_op
    slot = None
    if op.ring > 1:
        slot = kb.index(Val(m.trip[loop]) % op.ring, "slot")
    m.staged[op.result] = Staged(smem, op.ring, slot)
    if op.prefetch:
        return  # issued ahead by the loop (issue_ahead) and waited for at the start of this trip
    again = any(lp.work_items > lp.units(m.tk) for lp in T.enclosing_loops(op))
    if again and op.ring == 1:
        kb.barrier()  # a thread may come here again: the previous trip's readers of the box must be done
    copy(m, op, slot)
    if op.copy == "async":
        kb.cp_async_commit()
        kb.cp_async_wait(0)
    kb.barrier()


def copy(m, op: T.StageOp, slot: Value | None, at: dict | None = None) -> None:
    """All of the block's threads copy the stage's box into its shared memory (the `slot` copy of a ring); `at`
    overrides values of the subscript (a later trip's loop index)."""
    kb = m.kb
    src = op.source
    smem = m.stage_smem[op]
    box, dtype = op.box, op.result.type.dtype
    saved = {v: m.env[v] for v in (at or {}) if v in m.env}
    m.env.update(at or {})
    offsets = [m.kexpr(e) for e in op.index_exprs()]
    m.env.update(saved)
    shape = src.type.shape
    vec = op.copy_width()
    numel = math.prod(box)
    t = dtype if vec == 1 else TensorType(dtype, (vec,))
    with strided(kb, m.linear_thread() * vec, numel, m.tk.threads * vec, hint="e") as (_, e):
        local, flat = [], ix.Const(0)
        for d, (o, n, size) in enumerate(zip(offsets, box, shape)):
            inner = math.prod(box[d + 1 :])
            i = ix.Const(0) if n == 1 else Val(e) // inner if inner != 1 else Val(e)
            if n > 1 and inner * n < numel:
                i = i % n
            local.append(i)
            flat = flat * size + (o + i)
        dst = [Val(slot), *local] if slot is not None else local
        if op.copy == "async":
            kb.cp_async(m.ptr[src], [flat], smem, dst, TensorType(dtype, (vec,)))
        else:
            v = kb.load(m.ptr[src], [flat], t, "v")
            kb.store(v, smem, dst)


def _prefetched(loop: T.LoopOp) -> list[T.StageOp]:
    return [op for op in loop.body.ops if isinstance(op, T.StageOp) and op.prefetch]


@contextmanager
def pipelined(m, loop: T.LoopOp):
    """Around a loop whose stages are prefetched: the first copies before it, the drain after it."""
    stages = _prefetched(loop)
    if not stages:
        yield
        return
    kb = m.kb
    depth = stages[0].prefetch
    trips = loop.work_items
    for op in stages:
        _buffer(m, op)
    for p in range(depth):
        if p < trips:
            at = kb.index(ix.Const(p), "pre")
            for op in stages:
                copy(m, op, kb.index(ix.Const(p % op.ring), "slot") if op.ring > 1 else None, {loop.ivs[0]: at})
        kb.cp_async_commit()
    yield
    kb.cp_async_wait(0)


def issue_ahead(m, loop: T.LoopOp) -> None:
    """At the start of trip k of a loop with prefetched stages: wait for trip k's copies (the P newest groups may
    stay in flight), a barrier (every thread's copies are in; every thread is done reading trip k - 1), then issue
    trip k + P's copies into slot (k + P) mod ring (last read in trip k + P - ring <= k - 1), and commit (an empty
    group past the last trip, so the count of groups stays uniform)."""
    stages = _prefetched(loop)
    if not stages:
        return
    kb = m.kb
    depth = stages[0].prefetch
    k = m.trip[loop]
    kb.cp_async_wait(depth - 1)
    kb.barrier()
    ahead = kb.index(Val(k) + depth, "ahead")
    with kb.if_(kb.scalar("lt", ahead, kb.const(loop.work_items, index))) as br, br.then():
        for op in stages:
            slot = kb.index(Val(ahead) % op.ring, "slot") if op.ring > 1 else None
            copy(m, op, slot, {loop.ivs[0]: ahead})
    kb.cp_async_commit()
