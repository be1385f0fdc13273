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
from irforge.dialects.kernel.builder import Val

from irforge import index_expr as ix
from irforge.ir import Operation, Value
from irforge.types import TensorType, index

from .emit import strided
from .memory_access import load, pattern, store
from .memory_checks import params, producer_registers, producer_stages, why_not, why_not_producer, why_not_tma
from .memory_mbarriers import _init_mbarriers, _produced, _request, _wait, init_producer, produce, release, ring_trip
from .memory_smem import _buffer, block_index, slot_type

__all__ = [
    "Staged",
    "block_index",
    "init_producer",
    "issue_ahead",
    "load",
    "params",
    "pattern",
    "pipelined",
    "produce",
    "producer_registers",
    "producer_stages",
    "release",
    "slot_type",
    "stage",
    "store",
    "why_not",
    "why_not_producer",
    "why_not_tma",
]


@dataclass
class Staged:
    """A stage's shared memory: the buffer (`[ring,] *box` with padded rows), and the slot this trip reads."""

    smem: Value
    ring: int
    slot: Value | None = None


# ---- stages --------------------------------------------------------------------------------------------------------
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
    else:
        if again and op.ring == 1:
            kb.barrier()  # a thread may come here again: the previous trip's readers of the box must be done
        copy(m, op, slot)
        if op.copy == "async":
            kb.cp_async_commit()
            first = _first_reader_pipeline(op)
            if first is not None:
                m.waits_after_prologue.add(first)
                return
    m.unwaited.append(op)
    if not _joins_next(op):
        _wait_all(m)


def _joins_next(op: T.StageOp) -> bool:
    """Whether the op right after this stage is a stage copied and waited for in place: this copy's wait then
    waits with that one's, so that a run of stages (attention's Q, K and V slabs) costs one round trip, not one
    each."""
    ops = op.parent.ops
    at = ops.index(op) + 1
    nxt = ops[at] if at < len(ops) else None
    if not isinstance(nxt, T.StageOp) or nxt.prefetch or nxt.producer:
        return False
    return nxt.copy != "async" or _first_reader_pipeline(nxt) is None


def _wait_all(m) -> None:
    """Wait for the stages copied since the last wait: their mbarriers, the cp.async groups, then a barrier (every
    thread's copies are in) unless only the copy engine's boxes were waited for (each thread waits for them)."""
    kb = m.kb
    for op in m.unwaited:
        if op.copy == "tma":
            _wait(m, op)
    if any(op.copy == "async" for op in m.unwaited):
        kb.cp_async_wait(0)
    if any(op.copy != "tma" for op in m.unwaited):
        kb.barrier()
    m.unwaited.clear()


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
