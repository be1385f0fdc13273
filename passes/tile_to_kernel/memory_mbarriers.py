"""Copies by the tensor memory accelerator and the producer warp that issues them, on rings of mbarriers."""

from __future__ import annotations

from contextlib import ExitStack

from irforge.dialects import tile as T
from irforge.dialects.kernel.builder import Val
from irforge.dialects.kernel.types import MbarrierType
from irforge.dialects.tile import vectors

from irforge import index_expr as ix
from irforge.ir import Value
from irforge.types import index

from .memory_checks import tensormap_type
from .memory_smem import _buffer, _value_name


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
