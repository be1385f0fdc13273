from __future__ import annotations

import math

from irforge.dialects import tile as T
from irforge.dialects.loop import indexing
from irforge.passes.tile.heuristics import heuristic

from irforge import index_expr as ix
from irforge.ir import Operation, Value
from irforge.pass_manager import Choices, Pass, option


class TileStageInputs(Pass):
    """Stage the input slabs a block reads more than once in shared memory, so they leave global memory once.

    Where all of a block's threads stand at one point (the body of a band on block axes only, or the kernel body
    outside bands) and the block has several threads, a buffer whose loads at that point sit in two or more loops
    (a reduction's pass and the write-back pass, as in RMSNorm or LayerNorm) is copied there by a `tile.stage`:
    the box its loads reach (each subscript split into the point's part and the inner loops' range), if it fits
    the budget. Its loads then read the staged box. A staged buffer has no such loads left, so the pass is
    idempotent.
    """

    name = "tile-stage-inputs"
    input_level = "tile"
    anchor = "kernel"
    inputs: tuple[str, ...] = option(
        (), help="names of the buffers to stage, as printed (x, or a param's name); empty: every reused slab"
    )
    max_bytes: int = option(
        0,
        domain=Choices((0, 4096, 8192, 16384, 24576, 32768, 40960, 49152)),
        help="shared memory the kernel's staged boxes may take (0: the budget of passes/tile/heuristics.py)",
    )

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp):
            return
        if op.threads == 1:
            self.remark(op, "nothing staged: the block has one thread, so no load is shared")
            return
        budget = (self.max_bytes or heuristic().stage_budget(op)) - staged_bytes(op)
        wanted = {n.lstrip("%@") for n in self.inputs}
        bands = [lp for lp in op.walk() if _is_uniform_band(lp)]
        for owner in [*bands, op]:
            for buf, loads in _reused(owner, bands).items():
                name = _buffer_name(buf) or "a buffer"
                if wanted and _buffer_name(buf) not in wanted:
                    self.remark(loads[0], f"{name} not staged: not among inputs={','.join(self.inputs)}")
                    continue
                box = _box(owner, loads)
                if box is None:
                    self.remark(
                        loads[0],
                        f"{name} not staged: its loads reach no single box (a subscript mixes the block's point "
                        "with the inner loops, or the loads' points differ)",
                    )
                    continue
                nbytes = math.prod(box[1]) * buf.type.dtype.bytes
                if nbytes <= budget:
                    budget -= nbytes
                    _stage(owner, buf, loads, *box)
                    self.remark(op, f"{name} staged: box {list(box[1])} ({_kb(nbytes)}), {_kb(budget)} left")
                else:
                    self.remark(
                        loads[0], f"{name} not staged: the box ({_kb(nbytes)}) exceeds the budget ({_kb(budget)} left)"
                    )


def _kb(nbytes: int) -> str:
    return f"{nbytes / 1024:.3g} KB"


def staged_bytes(kernel: T.KernelOp) -> int:
    return sum(math.prod(s.box) * s.result.type.dtype.bytes for s in kernel.walk() if isinstance(s, T.StageOp))


def _buffer_name(buf: Value) -> str:
    if isinstance(buf.owner, T.ParamOp):
        return buf.owner.attributes["sym"].name
    return buf.name_hint or ""


def _is_uniform_band(lp: Operation) -> bool:
    """A loop on block axes only, with no thread-distributed loop or reduction around it."""
    return (
        isinstance(lp, T.ForOp)
        and bool(lp.bind)
        and all(a in T.BLOCK_AXES for a in lp.bind)
        and not any(
            isinstance(a, T.ReduceOp) or set(getattr(a, "bind", ())) & set(T.THREAD_AXES) for a in lp.ancestors()
        )
    )


def _reused(owner: Operation, bands: list) -> dict[Value, list[T.LoadOp]]:
    """Buffers read at `owner`'s point (outside other bands) by loads in two or more of its loops."""
    found: dict[Value, list] = {}
    for op in owner.walk():
        if not isinstance(op, T.LoadOp) or isinstance(op.buffer.owner, T.StageOp):
            continue
        if any(b is not owner and b.is_ancestor_of(op) for b in bands):
            continue
        found.setdefault(op.buffer, []).append(op)
    return {buf: loads for buf, loads in found.items() if len({id(_reader(ld, owner)) for ld in loads}) >= 2}


def _reader(load: T.LoadOp, owner: Operation) -> Operation:
    """The outermost loop inside `owner` around the load (the owner itself when there is none)."""
    cur, last = load.parent_op, owner
    while cur is not None and cur is not owner:
        if isinstance(cur, T.LoopOp):
            last = cur
        cur = cur.parent_op
    return last


def _box(owner: Operation, loads: list[T.LoadOp]):
    """(offsets, sizes) of the box the loads reach: per dimension, the subscripts' part fixed at the point (the same
    in every load; over values a stage at the start of `owner` can use) plus the inner loops' range. None when a
    subscript mixes the two, or the parts differ."""
    available = _available(owner)
    rank = loads[0].buffer.type.rank
    fixed: list = [None] * rank
    lo, hi = [math.inf] * rank, [-math.inf] * rank
    for ld in loads:
        inner = {iv: e for lp in T.enclosing_loops(ld) if owner.is_ancestor_of(lp) and lp is not owner
                 for iv, e in zip(lp.ivs, lp.extents)}  # fmt: skip
        for d, e in enumerate(ld.index_exprs()):
            at_point, moving = [], []
            for atom, k in T.linear_terms(e):
                leaves = indexing.used_values(atom)
                if all(v in available for v in leaves):
                    at_point.append((atom, k))
                elif all(v in inner for v in leaves):
                    moving.append((atom, k))
                else:
                    return None
            part = _sum(at_point)
            r = indexing.value_range(_sum(moving), inner)
            if r is None or (fixed[d] is not None and fixed[d] != part):
                return None
            fixed[d] = part
            lo[d], hi[d] = min(lo[d], r[0]), max(hi[d], r[1])
    return [f + low for f, low in zip(fixed, lo)], [h - low + 1 for low, h in zip(lo, hi)]


def _available(owner: Operation) -> set[Value]:
    """Values a stage at the start of `owner`'s body may use: its loop indices and values defined around it."""
    out = set(owner.body.args) if isinstance(owner, T.LoopOp) else set()
    cur = owner
    while not isinstance(cur, T.KernelOp):
        block = cur.parent
        out.update(block.args)
        for op in block.ops[: block.ops.index(cur)]:
            out.update(op.results)
        cur = block.parent.parent
    return out


def _sum(terms) -> ix.IndexExpr:
    out: ix.IndexExpr = ix.Const(0)
    for atom, k in terms:
        out = out + (k if atom == ix.Const(1) else atom * k)
    return out


def _stage(owner: Operation, buf: Value, loads: list[T.LoadOp], offsets, sizes) -> None:
    hint = f"{_buffer_name(buf).replace('.', '_') or 'buffer'}_smem"
    stage = T.StageOp.build(buf, offsets, sizes, hint=hint, loc=loads[0].loc)
    owner.body.insert(0, stage)
    for ld in loads:
        extents = T.loop_extents(ld)
        local = [indexing.simplify(e - o, extents) for e, o in zip(ld.index_exprs(), offsets)]
        new = T.LoadOp.build(stage.result, local, ld.result.name_hint, ld.loc)
        ld.parent.insert_before(ld, new)
        ld.result.replace_all_uses_with(new.result)
        ld.erase()
