"""lower-to-kernel's memory rules: loads and stores of register tiles, and stages (shared-memory copies).

A load or store is one kernel access of the tile its subscripts reach over the lane dimensions around it: along
each lane dimension the element offset moves by a constant (`vectors.LaneDim.stride`), so the access is a strided
tile (`kernel.load ... {strides = [...]}`) from lane 0's offset, moved as vectors along its unit-stride dimension
when the offsets are provably aligned to them. A lane dimension in lane groups (`split`) is two tile dimensions
in the access (groups, then lanes), reshaped back.

A stage is a shared-memory buffer filled by all of the block's threads (16-byte pieces where the rows allow),
then a barrier. Its attributes say how: `ring N` keeps N copies used in turn along the enclosing loop (trip k
uses copy k mod N: no barrier is needed before overwriting one); `async` copies with cp.async; `prefetch P`
issues the copy for trip k + P at the start of trip k (after waiting for trip k's own copy and a barrier), the
first P before the loop: the copies of later trips are in flight while this one computes; `pad` and `swizzle`
are the shared buffer's row padding and swizzle; `columns C` stores the box's rows in blocks of C columns, the
buffer `[box[-1] / C, *box[:-1], C]` (a load's subscript `[..., i, j]` reads `[j div C, ..., i, j mod C]`).

`tma`: the tensor memory accelerator copies the box. The kernel takes a `!kernel.tensormap` of the source (built
on the host, passed by value) and the stage an mbarrier per slot of its ring. One thread (the block's first)
announces the box's bytes on the slot's mbarrier (`arrive expect_tx`) and asks for the box (a box a block of
columns wide per block, where the stage has `columns`); every thread waits
for the slot's phase by its parity (the stage's trip k completes phase k div N of mbarrier k mod N); the
mbarriers are set up by that thread before the stage's loop (then a barrier). Prefetched, trip k waits for its
own box, passes a barrier (every thread is done with trip k - 1, whose slot trip k + P - N <= k - 1 reused) and
has trip k + P's box requested, as cp.async stages do.

`producer` (`tile-warp-specialize`): a warp added to the block (after its threads along x) issues the copies; a
warpgroup instead where the block's threads are whole warpgroups on sm_90a, which keeps 40 registers a thread and
gives the rest to them (`kernel.setmaxnreg`: a 256-thread block's threads then hold 232 instead of 168). Its
first thread walks the stages' loop on its own: for trip k it waits until slot k mod N is released (an `empty`
mbarrier per slot, one arrival per thread of the block), then announces and requests the trip's boxes. The
block's threads wait for each trip's boxes and release its slot when done reading it: at the end of the trip, or of
the next one where the trip's wgmma group stays in flight. No block-wide barrier is left in the loop, and the
producer runs as far ahead as the ring allows.
"""

from __future__ import annotations

import math
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from irforge.dialects import tile as T
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel import warpgroup as WG
from irforge.dialects.kernel.builder import Val
from irforge.dialects.kernel.types import MbarrierType, PtrType, SmemType, TensorMapType, tma_swizzle
from irforge.dialects.loop.indexing import multiple_of
from irforge.dialects.tile import vectors
from irforge.dialects.tile.columns import varies, writer_axes

from irforge import index_expr as ix
from irforge.ir import Operation, Value
from irforge.target import target
from irforge.types import TensorType, index

from . import combines
from .emit import strided, value_hint
from .swizzle_runs import xor_runs


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
        why = why_not_tma(op)
        if why:
            return why
    if "columns" in op.attributes:
        from .tensor_cores import read_through_descriptors  # here: tensor_cores imports this module

        if op.copy != "tma" or not read_through_descriptors(kernel, op):
            return (
                f"is stored in blocks of {op.columns} columns, which only the tensor memory accelerator writes and "
                "only wgmma's descriptors read (every load of it a factor of a wgmma)"
            )
    if op.ring > 1 or op.prefetch:
        why = op.why_not_ring()
        if why:
            return why
    if op.prefetch:
        return op.why_not_prefetch()
    if op.producer:
        return why_not_producer(op)
    return None


def tensormap_type(op: T.StageOp) -> TensorMapType:
    """The tensor map a `tma` stage copies its box with, a block of its columns at a time (raises ValueError
    where the copy engine cannot)."""
    dtype = op.result.type.dtype
    box = (*op.box[:-1], op.columns)
    span = op.columns * dtype.bytes if op.attributes.get("swizzle") else 0
    return TensorMapType(dtype, op.source.type.shape, box, span)


def why_not_tma(op: T.StageOp) -> str | None:
    """Why the tensor memory accelerator cannot copy the stage (None when it can): the target has none, the box is
    no tensor map's (at most 256 elements a dimension, rank 5, rows of 16-byte multiples), the shared copy is
    padded or swizzled otherwise than the copy engine writes, a ring's slots are not aligned for it, or a loop
    around the stage other than its own makes several trips (its mbarriers' phases count the stage's trips in
    one run of its loop)."""
    if not target().has("tma"):
        return f"is copied by the tensor memory accelerator, which {target().arch} lacks (sm_90 and later have it)"
    if op.attributes.get("pad"):
        return "has padded rows, which the tensor memory accelerator does not write (it writes the box densely)"
    try:
        tm = tensormap_type(op)
    except ValueError as e:
        return f"is not a box the tensor memory accelerator copies: {e}"
    sw = tuple(op.attributes.get("swizzle", ()))
    if sw and sw != tma_swizzle(tm.swizzle, tm.dtype):
        want = ", ".join(map(str, tma_swizzle(tm.swizzle, tm.dtype)))
        return (
            f"is swizzled otherwise than the tensor memory accelerator writes {tm.swizzle}-byte rows (swizzle({want}))"
        )
    slot = slot_type(op)
    if op.ring > 1 and slot.nbytes % slot.align:
        return f"has {slot.nbytes}-byte slots; the tensor memory accelerator needs each at a multiple of {slot.align}"
    kernel = T.kernel_of(op)
    for lp in T.enclosing_loops(op):
        persistent = op.producer and lp.bind and set(lp.bind) <= set(T.BLOCK_AXES)  # over tiles: `ring_trip`
        if lp.work_items > lp.units(kernel) and (lp is not op.parent_op or lp.bind) and not persistent:
            return (
                "is copied by the tensor memory accelerator inside a loop whose threads make several trips; its "
                "mbarriers count the trips of one run of the stage's own loop"
            )
    return None


def why_not_producer(op: T.StageOp) -> str | None:
    """Why a producer warp cannot issue the stage's copies (None when it can): the stage must sit directly in an
    undistributed loop, the block must be whole warps along x with room for one more, every stage of the kernel
    must be a producer stage of that loop with one ring, no combine may cross the block's threads (the producer
    warp reaches none of their barriers) or go through a cluster (which places the block's own threads' carriers
    only), and every loop around the stage's loop must make one trip a thread
    (each of the block's threads releases every slot; the producer takes the block's own units)."""
    why = op.why_not_ring()
    if why:
        return why
    kernel, loop, warp = T.kernel_of(op), op.parent_op, target().warp_size
    if kernel.axis_size("threadIdx.y") * kernel.axis_size("threadIdx.z") != 1 or kernel.threads % warp:
        return "is copied by a producer warp, which joins a block of whole warps along x alone"
    if kernel.threads + warp > target().max_threads:
        return f"is copied by a producer warp, for which a block of {kernel.threads} threads has no room"
    for other in kernel.walk():
        ours = isinstance(other, T.StageOp) and other.producer and other.parent_op is loop and other.ring == op.ring
        if isinstance(other, T.StageOp) and not ours:
            return "is copied by a producer warp, but the kernel has other stages (their barriers need every warp)"
        if isinstance(other, T.CombineOp) and other.over[0] in T.THREAD_AXES:
            return "is copied by a producer warp, but the kernel combines across its threads (no barrier for the warp)"
        if isinstance(other, T.CombineOp) and other.attributes.get("via") == "cluster":
            return (
                "is copied by a producer warp, but the kernel combines through a cluster (of the block's own threads)"
            )
    for lp in T.enclosing_loops(loop):
        threads = [a for a in lp.bind if a in T.THREAD_AXES]
        if threads and (len(threads) != len(lp.bind) or not lp.one_item_a_unit(kernel)):
            return "is copied by a producer warp, inside a loop whose threads do not each take one work item"
        if not lp.bind and lp.work_items > 1:
            return "is copied by a producer warp, inside a loop around its own that makes several trips"
    return None


def producer_stages(tk: T.KernelOp) -> list[T.StageOp]:
    """The stages a producer warp copies (all of the kernel's or none: `why_not_producer`)."""
    return [op for op in tk.walk() if isinstance(op, T.StageOp) and op.producer]


def producer_registers(tk: T.KernelOp) -> tuple[int, int] | None:
    """(producer, consumer) registers per thread where the producer is a warpgroup that gives its registers to the
    block's threads (`kernel.setmaxnreg`, sm_90a, a block of whole warpgroups that gains by it); None: a warp."""
    if not target().has("wgmma") or tk.threads % WG.WARPGROUP:
        return None
    return WG.register_split(tk.threads)


def params(tk: T.KernelOp) -> list[tuple[Value, object]]:
    """The kernel's parameters: (buffer, type) for each buffer it reads otherwise than through the tensor memory
    accelerator (a `!kernel.ptr`), each tensor map its `tma` stages copy with, each buffer it writes."""
    tma = [op for op in tk.walk() if isinstance(op, T.StageOp) and op.copy == "tma"]
    direct = {op.operands[0] for op in tk.walk() if isinstance(op, (T.LoadOp, T.StageOp)) and op not in tma}
    reads = [(b, PtrType(b.type.dtype)) for b in tk.read_buffers() if b in direct]
    maps = list(dict.fromkeys((op.source, tensormap_type(op)) for op in tma))
    return reads + maps + [(b, PtrType(b.type.dtype)) for b in tk.stored_buffers()]


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


# ---- stages --------------------------------------------------------------------------------------------------------
def slot_type(op: T.StageOp) -> SmemType:
    """One slot of the stage's shared memory: the box, rows padded, or in blocks of `columns`."""
    box, c = op.box, op.columns
    shape = (*box[:-1], box[-1] + op.attributes.get("pad", 0)) if c == box[-1] else (box[-1] // c, *box[:-1], c)
    return SmemType(op.result.type.dtype, shape, op.attributes.get("swizzle", ()))


def block_index(op: T.StageOp, index: list) -> list:
    """The shared buffer's subscript (past the ring's slot) of the element a load of the stage reads at `index`."""
    c = op.columns
    if c == op.box[-1]:
        return index
    return [index[-1] // c, *index[:-1], index[-1] % c]


def _smem_type(op: T.StageOp) -> SmemType:
    t = slot_type(op)
    return SmemType(t.dtype, (op.ring, *t.shape), t.swizzle) if op.ring > 1 else t


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
        slot = kb.index(ring_trip(m, loop) % op.ring, "slot")
    m.staged[op.result] = Staged(smem, op.ring, slot)
    if op.prefetch or op.producer:
        return  # issued ahead (by the loop or the producer warp) and waited for at the start of this trip
    again = any(lp.work_items > lp.units(m.tk) for lp in T.enclosing_loops(op))
    if op.copy == "tma":
        if not isinstance(loop, T.LoopOp):
            _init_mbarriers(m, [op])  # once: no loop around it makes several trips (why_not_tma)
        elif again:
            kb.barrier()  # every thread is done with the slot's previous box (the wait is per thread)
        _request(m, op, slot)
        _wait(m, op)
        return
    if again and op.ring == 1:
        kb.barrier()  # a thread may come here again: the previous trip's readers of the box must be done
    copy(m, op, slot)
    if op.copy == "async":
        kb.cp_async_commit()
        first = _first_reader_pipeline(op)
        if first is not None:
            m.waits_after_prologue.add(first)
            return
        kb.cp_async_wait(0)
    kb.barrier()


def _first_reader_pipeline(op: T.StageOp) -> T.LoopOp | None:
    """The loop whose prologue this copy's wait may follow: where every read of the stage lies in the body of one
    loop whose stages the tensor memory accelerator prefetches (a decode step's q before its K/V ring), the copy
    stays in flight while that loop's first boxes are requested (their mbarriers keep cp.async's groups free)."""
    readers = [u for u, _ in op.result.uses]
    loops = {lp for r in readers for lp in T.enclosing_loops(r) if isinstance(lp, T.LoopOp) and _tma_pipeline(lp)}
    inner = [lp for lp in loops if all(lp.is_ancestor_of(r) for r in readers)]
    if not readers or not inner:
        return None
    loop = max(inner, key=lambda lp: len(T.enclosing_loops(lp)))  # the innermost holding them all
    parent = op.parent
    for later in parent.ops[parent.ops.index(op) + 1 :]:
        if later.is_ancestor_of(loop):
            return loop if _only_headers(later, loop) else None
        if any(later is r or later.is_ancestor_of(r) for r in readers):
            return None
    return None


def _tma_pipeline(loop: T.LoopOp) -> bool:
    stages = _prefetched(loop)
    return bool(stages) and all(st.copy == "tma" for st in stages)


def _only_headers(outer: Operation, loop: T.LoopOp) -> bool:
    """Whether nothing but loops' headers and carriers' inits run from `outer` down to `loop`: each loop on the way
    holds the next one and no stage or barrier-making op before it."""
    cur = outer
    while cur is not loop:
        inside = [o for o in cur.body.ops if o.is_ancestor_of(loop) or o is loop]
        if len(inside) != 1:
            return False
        nxt = inside[0]
        before = cur.body.ops[: cur.body.ops.index(nxt)]
        if any(isinstance(o, (T.StageOp, T.LoopOp, T.CombineOp)) for o in before):
            return False
        cur = nxt
    return True


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
    step = m.tk.threads * vec
    with strided(kb, m.linear_thread() * vec, numel, step, hint="e") as (lp, e):
        # A counted loop's item is trip * step + thread * vec: its box coordinates are simplified over those two
        # ranges (`(k * 1024 + t * 8) floordiv 128` is `k * 8 + t floordiv 16`), so each trip's address is the
        # thread's plus a constant, not a division the compiler redoes per copy.
        counted = e is not lp.iv
        item = ix.Dim(0) * step + ix.Dim(1) * vec if counted else ix.Dim(0)
        ranges = (-(-numel // step), m.tk.threads) if counted else (numel,)
        leaves = (Val(lp.iv), m.linear_thread()) if counted else (Val(e),)
        local, flat = [], ix.Const(0)
        for d, (o, n, size) in enumerate(zip(offsets, box, shape)):
            inner = math.prod(box[d + 1 :])
            i = ix.Const(0) if n == 1 else item // inner if inner != 1 else item
            if n > 1 and inner * n < numel:
                i = i % n
            i = ix.simplify(i, ranges).substitute(leaves)
            local.append(i)
            flat = flat * size + (o + i)
        dst = [Val(slot), *local] if slot is not None else local
        if op.copy == "async":
            kb.cp_async(m.ptr[src], [flat], smem, dst, TensorType(dtype, (vec,)))
        else:
            v = kb.load(m.ptr[src], [flat], t, "v")
            kb.store(v, smem, dst)
        if counted and not e.uses:
            e.owner.erase()  # the item itself went unused: its coordinates were taken from the trip and thread


def _prefetched(loop: T.LoopOp) -> list[T.StageOp]:
    return [op for op in loop.body.ops if isinstance(op, T.StageOp) and op.prefetch]


def _issue(m, op: T.StageOp, slot: Value | None, at: dict) -> None:
    if op.copy == "tma":
        _request(m, op, slot, at)
    else:
        copy(m, op, slot, at)


@contextmanager
def pipelined(m, loop: T.LoopOp):
    """Around a loop whose stages are prefetched or copied by the tensor memory accelerator: the mbarriers set up
    and the first copies before it, the drain after it."""
    stages = _prefetched(loop)
    tma = [op for op in loop.body.ops if isinstance(op, T.StageOp) and op.copy == "tma" and not op.producer]
    if tma:
        _init_mbarriers(m, tma)
    if not stages:
        yield
        _drain_wgmma(m, loop)
        return
    kb = m.kb
    depth = stages[0].prefetch
    trips = loop.work_items
    groups = any(op.copy == "async" for op in stages)
    for op in stages:
        _buffer(m, op)
    bound = m.trip_bound.get(loop)  # a mask cuts the loop short: no copy past its last trip (left in flight)
    if _reads_may_linger(loop, stages, depth, masked=bound is not None):
        kb.barrier()
    for p in range(depth):
        if p < trips:
            at = kb.index(ix.Const(p), "pre")
            with ExitStack() as guard:
                if bound is not None:
                    br = guard.enter_context(kb.if_(kb.scalar("lt", at, bound)))
                    guard.enter_context(br.then())
                for op in stages:
                    _issue(m, op, kb.index(ix.Const(p % op.ring), "slot") if op.ring > 1 else None, {loop.ivs[0]: at})
        if groups:
            kb.cp_async_commit()
    if loop in m.waits_after_prologue:  # an earlier stage's copy, left in flight behind this prologue
        kb.cp_async_wait(0)
        kb.barrier()
    yield
    if groups:
        kb.cp_async_wait(0)
    _drain_wgmma(m, loop)


def _reads_may_linger(loop: T.LoopOp, stages: list[T.StageOp], depth: int, masked: bool) -> bool:
    """Whether the prologue's copies may overwrite a slot other threads still read: the loop runs again in each
    thread (an enclosing loop takes several trips a thread: a persistent block's tiles, a loop over outputs), and
    its last trip (any trip, where a mask cuts the loop short) reads, after its last barrier, a slot the prologue
    fills."""
    kernel = T.kernel_of(loop)
    if not any(lp.work_items > lp.units(kernel) for lp in T.enclosing_loops(loop) if lp is not loop):
        return False
    last = loop.work_items - 1
    filled = range(min(depth, loop.work_items))
    return masked or any(last % op.ring == p % op.ring for op in stages for p in filled)


def _drain_wgmma(m, loop: T.LoopOp) -> None:
    """After a loop whose trips left their wgmma group in flight: wait for the last (its accumulator is read next)."""
    if loop in m.wgmma_in_flight:
        m.kb.wgmma_wait(0)


def issue_ahead(m, loop: T.LoopOp) -> None:
    """At the start of trip k of a loop with prefetched stages: wait for trip k's copies (the P newest cp.async
    groups may stay in flight; a `tma` stage's slot by its mbarrier), a barrier (every thread's copies are in;
    every thread is done reading trip k - 1), then issue trip k + P's copies into slot (k + P) mod ring (last read
    in trip k + P - ring <= k - 1), and commit (an empty group past the last trip, so the count of groups stays
    uniform). A producer warp's stages: only the wait for trip k's boxes (the producer issues them, `produce`)."""
    produced = _produced(loop)
    for op in produced:
        _wait(m, op)
    stages = _prefetched(loop)
    if not stages:
        return
    kb = m.kb
    depth = stages[0].prefetch
    k = m.trip[loop]
    groups = any(op.copy == "async" for op in stages)
    if groups:
        kb.cp_async_wait(depth - 1)
    for op in stages:
        if op.copy == "tma":
            _wait(m, op)
    kb.barrier()
    ahead = kb.index(Val(k) + depth, "ahead")
    trips = m.trip_bound.get(loop) or kb.const(loop.work_items, index)
    with kb.if_(kb.scalar("lt", ahead, trips)) as br, br.then():
        for op in stages:
            _issue(m, op, kb.index(Val(ahead) % op.ring, "slot") if op.ring > 1 else None, {loop.ivs[0]: ahead})
    if groups:
        kb.cp_async_commit()


# ---- a producer warp -----------------------------------------------------------------------------------------------
def _produced(loop: T.LoopOp) -> list[T.StageOp]:
    return [op for op in loop.body.ops if isinstance(op, T.StageOp) and op.producer]


def _empty(m, loop: T.LoopOp) -> Value:
    """The mbarriers by which the block's threads release the slots of `loop`'s producer stages."""
    got = m.stage_bars.get(loop)
    if got is None:
        got = m.stage_bars[loop] = m.smem(MbarrierType(_produced(loop)[0].ring), "empty")
    return got


def init_producer(m, stages: list[T.StageOp]) -> None:
    """Before the warps part: the block's first thread sets up the stages' mbarriers (one arrival per phase on
    each `full` one, the copy engine's bytes; one per thread of the block on each `empty` one); a barrier that
    every warp, the producer too, reaches publishes them."""
    kb = m.kb
    loop = stages[0].parent_op
    with kb.if_(_leader(m)) as br, br.then():
        for op in stages:
            bars = _mbarriers(m, op)
            for i in range(op.ring):
                kb.mbarrier_init(bars, i, 1)
        empty = _empty(m, loop)
        for i in range(stages[0].ring):
            kb.mbarrier_init(empty, i, m.tk.threads)
    kb.barrier()


def produce(m, stages: list[T.StageOp]) -> None:
    """The producer warp's program: its first thread takes the block's units of the loops around the stages'
    loop, then for each trip k waits for slot k mod ring to be released (phase k div ring - 1 of its `empty`
    mbarrier; the first pass over the ring waits for nothing) and requests the trip's boxes."""
    from .lower_to_kernel import lanes_of, work_items

    kb = m.kb
    loop, ring = stages[0].parent_op, stages[0].ring
    first = kb.scalar("eq", kb.index(m.linear_thread(), "lin"), kb.const(m.tk.threads, index))
    with kb.if_(first) as br, br.then(), ExitStack() as around:
        for outer in reversed(T.enclosing_loops(loop)):
            if any(a in T.THREAD_AXES for a in outer.bind):
                continue  # the boxes do not move with the block's threads (why_not)
            _, w = around.enter_context(work_items(m, outer))
            around.enter_context(lanes_of(m, outer, w))
        with kb.for_(0, loop.work_items, hint="k") as trips:
            m.trip[loop] = k = trips.iv
            g = ring_trip(m, loop)
            slot = kb.index(g % ring, "slot")
            kb.mbarrier_wait(_empty(m, loop), Val(slot), (g // ring + 1) % 2)
            for op in stages:
                _request(m, op, slot, {loop.ivs[0]: k}, leader=False)


def ring_trip(m, loop: T.LoopOp) -> ix.IndexExpr:
    """Trip k of `loop` as its rings count it: over all the tiles of a block that walks several (tile-persistent),
    the t-th tile's trip k is t x trips + k, so a slot's mbarrier phases go on from one tile to the next."""
    k: ix.IndexExpr = Val(m.trip[loop])
    for lp in T.enclosing_loops(loop):
        units = lp.units(m.tk)
        if lp.bind and lp.work_items > units:
            k = (Val(m.trip[lp]) - m.unit(lp.bind)) // units * loop.work_items + k
    return k


def release(m, loop: T.LoopOp) -> None:
    """At the end of trip k of a loop with producer stages: every thread releases the slot it is done reading,
    trip k's, or trip k - 1's where trip k's wgmma group is still in flight (it reads its slot until it completes)."""
    stages = _produced(loop)
    if not stages:
        return
    kb = m.kb
    k, ring = ring_trip(m, loop), stages[0].ring
    if loop not in m.wgmma_in_flight:
        kb.mbarrier_arrive(_empty(m, loop), k % ring)
        return
    trip = k.value if isinstance(k, Val) else kb.index(k, "trip")
    with kb.if_(kb.scalar("lt", kb.const(0, index), trip)) as br, br.then():
        kb.mbarrier_arrive(_empty(m, loop), (k + ring - 1) % ring)


# ---- the tensor memory accelerator -----------------------------------------------------------------------------
def _mbarriers(m, op: T.StageOp) -> Value:
    """The stage's mbarriers, one per slot of its ring."""
    got = m.stage_bars.get(op)
    if got is None:
        got = m.stage_bars[op] = m.smem(MbarrierType(op.ring), f"{_value_name(op.source)}_full")
    return got


def _leader(m) -> Value:
    kb = m.kb
    return kb.scalar("eq", kb.index(m.linear_thread(), "lin"), kb.const(0, index))


def _init_mbarriers(m, stages: list[T.StageOp]) -> None:
    """The block's first thread sets up each stage's mbarriers (one arrival, its own, per phase); a barrier
    publishes them."""
    kb = m.kb
    with kb.if_(_leader(m)) as br, br.then():
        for op in stages:
            bars = _mbarriers(m, op)
            for i in range(op.ring):
                kb.mbarrier_init(bars, i, 1)
    kb.barrier()


def _request(m, op: T.StageOp, slot: Value | None, at: dict | None = None, leader: bool = True) -> None:
    """The block's first thread (or the thread running this: `leader` False) announces the box's bytes on the
    slot's mbarrier and asks the copy engine for it (`at` overrides values of the subscript: a later trip's loop
    index)."""
    kb = m.kb
    smem, bars = _buffer(m, op), _mbarriers(m, op)
    saved = {v: m.env[v] for v in (at or {}) if v in m.env}
    m.env.update(at or {})
    coords = [m.kexpr(vectors.expand(e)) for e in op.index_exprs()]
    m.env.update(saved)
    i = Val(slot) if slot is not None else 0
    tm = tensormap_type(op)
    blocks = op.box[-1] // op.columns
    with ExitStack() as guard:
        if leader:
            guard.enter_context(guard.enter_context(kb.if_(_leader(m))).then())
        kb.mbarrier_arrive(bars, i, expect_tx=tm.box_bytes * blocks)
        for b in range(blocks):
            at = [*coords[:-1], coords[-1] + b * op.columns] if b else coords
            dst = ([i] if slot is not None else []) + ([b] if blocks > 1 else [])
            kb.tma_load(m.tmap[(op.source, tm)], at, smem, dst, bars, i)


def _wait(m, op: T.StageOp) -> None:
    """Every thread waits for this trip's box: trip k completes phase k div ring of mbarrier k mod ring."""
    kb = m.kb
    loop = op.parent_op
    k = ring_trip(m, loop) if isinstance(loop, T.LoopOp) and not loop.bind else ix.Const(0)
    i = k % op.ring if op.ring > 1 else 0
    kb.mbarrier_wait(_mbarriers(m, op), i, (k // op.ring if op.ring > 1 else k) % 2)
