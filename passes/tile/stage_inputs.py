from __future__ import annotations

import math

from irforge.dialects import tile as T
from irforge.dialects.loop import indexing
from irforge.dialects.tile.vectors import expand
from irforge.dialects.tile.workspace import workspace_bytes
from irforge.passes.tile.chunk_reduce import is_chunk
from irforge.passes.tile.heuristics import heuristic

from irforge import index_expr as ix
from irforge.ir import Operation, Value
from irforge.pass_manager import Choices, Pass, option


class TileStageInputs(Pass):
    """Stage the input slabs a block reads more than once in shared memory, so they leave global memory once.

    A stage goes where all of a block's threads stand together: the start of a band's point (a loop on block axes
    only), of the kernel, or of a trip of a reduction whose enclosing thread loops give every thread one work item
    (a contraction's chunk of K: `tile-chunk-reduce`). There, a buffer whose loads below reach fewer elements than
    they read (each element read twice or more: by two loops of a thread, as RMSNorm's two passes over its row,
    or by several threads, as a contraction's A and B slabs are by a block's rows and columns) is copied once into
    a `tile.stage` of the box the loads reach (each subscript split into the point's part and the range of the
    loops and threads below), if it fits the budget; the loads then read the copy. A staged buffer has no such
    loads left, so the pass is idempotent.
    """

    name = "tile-stage-inputs"
    input_level = "tile"
    anchor = "kernel"
    inputs: tuple[str, ...] = option(
        (), help="names of the buffers to stage, as printed (x, or a param's name); empty: every reused slab"
    )
    max_bytes: int = option(
        0,
        domain=Choices((0, 4096, 8192, 16384, 24576, 32768, 40960, 49152, 65536, 98304)),
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
        for owner in owners(op):
            for buf, loads in _reused(owner, op).items():
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
    """Shared memory the kernel's stages (every slot of their rings) and its combines (among warps, through
    clusters) take."""
    return workspace_bytes(kernel) + sum(
        math.prod(s.box) * s.result.type.dtype.bytes * s.ring for s in kernel.walk() if isinstance(s, T.StageOp)
    )


def _buffer_name(buf: Value) -> str:
    if isinstance(buf.owner, T.ParamOp):
        return buf.owner.attributes["sym"].name
    return buf.name_hint or ""


def owners(kernel: T.KernelOp) -> list[Operation]:
    """Where stages may go, innermost first: trips of reductions the whole block runs together, band points, the
    kernel."""
    trips = [r for r in kernel.walk() if isinstance(r, T.ReduceOp) and _together(r)]
    bands = [lp for lp in kernel.walk() if _is_uniform_band(lp)]
    return [*reversed(trips), *bands, kernel]


def _together(r: T.ReduceOp) -> bool:
    """A reduction every thread of the block runs trip by trip together: not distributed or vectorized, and every
    thread loop around it gives each thread one work item (a reduction around it split over blocks is fine: a
    block's threads share its unit; so is one sliced among warps, a share a warp: its warps walk their shares'
    trips side by side)."""
    if r.bind or r.vector > 1 or not any(isinstance(x, T.LoopOp) for x in r.walk() if x is not r):
        return False
    if is_chunk(r) and not r.parent_op.bind:  # a chunk of K: the enclosing trip stages the whole chunk's slabs
        return False
    k = T.kernel_of(r)
    for lp in T.enclosing_loops(r):
        on_threads = any(a in T.THREAD_AXES for a in lp.bind)
        if isinstance(lp, T.ReduceOp) and lp.vector > 1:
            return False
        if on_threads and not lp.one_item_a_unit(k):
            return False
    return True


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


def _moving(owner: Operation, load: T.LoadOp) -> dict[Value, int]:
    """{index: extent} of the indices that take all their values while the block stands at `owner`'s point: the
    loops inside it around the load, and the thread loops around it whose every work item has its thread."""
    out = {}
    kernel = T.kernel_of(load)
    for lp in T.enclosing_loops(load):
        inside = lp is not owner and owner.is_ancestor_of(lp)
        block_wide = (
            lp is not owner
            and lp.is_ancestor_of(owner)
            and any(a in T.THREAD_AXES for a in lp.bind)
            and lp.one_item_a_unit(kernel)
        )
        if inside or block_wide:
            out.update(zip(lp.ivs, lp.extents))
    return out


def _reused(owner: Operation, kernel: T.KernelOp) -> dict[Value, list[T.LoadOp]]:
    """Buffers whose loads below `owner` (not below a deeper owner) read their elements more than once."""
    found: dict[Value, list] = {}
    for op in owner.walk():
        if not isinstance(op, T.LoadOp) or isinstance(op.buffer.owner, T.StageOp) or not op.buffer.type.shape:
            continue
        if _home(op, kernel) is not owner:
            continue
        found.setdefault(op.buffer, []).append(op)
    out = {}
    for buf, loads in found.items():
        box = _box(owner, loads)
        if box is None:
            continue
        reads = sum(math.prod(_moving(owner, ld).values()) / _blocks_sharing(owner, ld, kernel) for ld in loads)
        shared = not isinstance(owner, T.ReduceOp) and not any(
            iv in _block_indices(kernel) for e in box[0] for iv in indexing.used_values(e)
        )
        if reads >= heuristic().stage_reuse(kernel, shared) * math.prod(box[1]):
            out[buf] = loads
    return out


def _blocks_sharing(owner: Operation, load: T.LoadOp, kernel: T.KernelOp) -> int:
    """Over how many blocks the loops inside `owner` around `load` deal their iterations (the block reads its share
    of the moving indices' range)."""
    n = 1
    for lp in T.enclosing_loops(load):
        on_blocks = [a for a in lp.bind if a in T.BLOCK_AXES]
        if lp is owner or not owner.is_ancestor_of(lp) or not on_blocks:
            continue
        per_block = math.prod(kernel.axis_size(a) for a in lp.bind if a in T.THREAD_AXES)
        n *= min(math.prod(kernel.axis_size(a) for a in on_blocks), -(-lp.work_items // per_block))
    return n


def _block_indices(kernel: T.KernelOp) -> set[Value]:
    """The indices of loops distributed over block axes: what a box varying with them differs in from block to
    block."""
    return {iv for lp in kernel.walk() if isinstance(lp, T.LoopOp) for iv in lp.ivs if set(lp.bind) & set(T.BLOCK_AXES)}


def _home(load: T.LoadOp, kernel: T.KernelOp) -> Operation:
    """The owner whose stage a load reads: the innermost around it, or further out of reduction trips while its
    subscripts do not depend on them (attention's Q tile, the same for every chunk of keys, is staged once per
    block rather than per chunk)."""
    around = [o for o in owners(kernel) if o is kernel or o.is_ancestor_of(load)]  # innermost first
    used = {v for e in load.index_exprs() for v in indexing.used_values(expand(e))}
    home = around[0]
    for outer in around[1:]:
        if not isinstance(home, T.ReduceOp):  # a band's point: its blocks do not share what they stage
            break
        passed = [
            o for o in around if o is home or (o is not outer and outer.is_ancestor_of(o) and o.is_ancestor_of(home))
        ]
        if any(iv in used for o in passed if isinstance(o, T.LoopOp) for iv in o.ivs):
            break
        home = outer
    return home


def _box(owner: Operation, loads: list[T.LoadOp]):
    """(offsets, sizes) of the box the loads reach: per dimension, the subscripts' part fixed at the point (the same
    in every load; over values a stage at the start of `owner` can use) plus the moving indices' range. None when a
    subscript mixes the two, or the parts differ."""
    available = _available(owner)
    rank = loads[0].buffer.type.rank
    fixed: list = [None] * rank
    lo, hi = [math.inf] * rank, [-math.inf] * rank
    for ld in loads:
        moving = _moving(owner, ld)
        for d, e in enumerate(ld.index_exprs()):
            at_point, varying = [], []
            for atom, k in T.linear_terms(expand(e)):
                leaves = indexing.used_values(atom)
                if all(v in moving for v in leaves):
                    varying.append((atom, k))
                elif all(v in available and v not in moving for v in leaves):
                    at_point.append((atom, k))
                else:
                    return None
            part = _sum(at_point)
            r = indexing.value_range(_sum(varying), moving)
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
        extents = indexing.loop_extents(ld)
        local = [indexing.simplify(expand(e) - o, extents) for e, o in zip(ld.index_exprs(), offsets)]
        new = T.LoadOp.build(stage.result, local, ld.result.name_hint, ld.loc)
        ld.parent.insert_before(ld, new)
        ld.result.replace_all_uses_with(new.result)
        ld.erase()
