"""lower-to-kernel's rule for `tile.combine` over threadIdx.x: an xor-shuffle ladder within each warp (written
once as a loop over the offsets, unrolled when printed), then, past 32 threads, each warp's carrier through shared
memory, a barrier, every thread folding its row's partials, a barrier. Blocks that are not whole warps combine
through shared memory alone (shuffles need all 32 lanes). Over a block axis: atomics (below), a cluster's
distributed shared memory (`clusters.py`) or a second kernel (`partials.py`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from irforge.dialects import tile as T
from irforge.dialects.kernel.builder import Val
from irforge.dialects.kernel.types import SmemType, element_type
from irforge.dialects.scalar import CastOp
from irforge.dialects.tile.algebra import affine_stores
from irforge.dialects.tile.vectors import Lanes

from irforge import index_expr as ix
from irforge.ir import Operation, Value
from irforge.target import target
from irforge.types import TensorType, index

from . import clusters, partials
from .emit import combine_values, value_hint


def why_not(kernel: T.KernelOp, op: Operation) -> str | None:
    if not isinstance(op, T.CombineOp):
        return None
    if len(op.over) == 1 and op.over[0] in T.BLOCK_AXES:
        if clusters.via_cluster(op):
            return clusters.why_not(kernel, op)
        if partials.via_partials(op):
            return partials.why_not(op)
        return affine_stores(op)
    if op.over == ("threadIdx.y",):
        return _why_not_over_warps(kernel, op)
    if op.over != ("threadIdx.x",):
        return (
            f"combines over {', '.join(op.over)}; only combines over threadIdx.x, threadIdx.y or one block axis are "
            "materialized"
        )
    bx = kernel.axis_size("threadIdx.x")
    if bx & (bx - 1):
        return f"combines over {bx} threads along threadIdx.x; the shuffle ladder needs a power of two"
    lanes = Lanes()
    if any(lanes.of(v) for v in op.operands):
        return "combines register tiles (a reduction shared by threads inside a vectorized loop)"
    return None


# ---- across blocks --------------------------------------------------------------------------------------------
# A combine over a block axis is materialized with atomics: every block adds its own partial carrier into the
# output (zeroed by a kernel launched before), through the epilogue when that is affine in the carrier: each op on
# the way keeps `value = coef * partial + const` (an `Affine`), the first block adds the constant part.
@dataclass
class Affine:
    partial: Value  # this block's partial carrier (kernel value)
    coef: Value | None = None  # None: 1
    const: Value | None = None  # None: 0


def affine_math(m, op) -> Value | None:
    """The rule for an op on an affine value (None: no operand is one)."""
    kb = m.kb
    args = [m.affine.get(v) for v in op.operands]
    if not any(args):
        return None
    if isinstance(op, CastOp):
        m.affine[op.result] = args[0]
        return args[0].partial
    fn = op.fn
    a = args[0] or args[1]
    other = [m.get(v) for v, x in zip(op.operands, args) if x is None]
    y = other[0] if other else None

    def scale(x, f):
        return None if x is None and f is None else kb.scalar(fn, x if x is not None else _one(kb, a), f)

    if fn == "neg":
        new = Affine(a.partial, kb.scalar("neg", a.coef or _one(kb, a)), a.const and kb.scalar("neg", a.const))
    elif fn in ("mul", "div"):
        new = Affine(a.partial, scale(a.coef, y), a.const and kb.scalar(fn, a.const, y))
    elif fn == "add":
        new = Affine(a.partial, a.coef, y if a.const is None else kb.scalar("add", a.const, y))
    elif args[0] is not None:  # x - y
        new = Affine(a.partial, a.coef, kb.scalar("neg", y) if a.const is None else kb.scalar("sub", a.const, y))
    else:  # y - x
        new = Affine(
            a.partial, kb.scalar("neg", a.coef or _one(kb, a)), y if a.const is None else kb.scalar("sub", y, a.const)
        )
    m.affine[op.result] = new
    return new.partial


def _one(kb, a: Affine) -> Value:
    return kb.const(1.0, element_type(a.partial.type))


def contribution(m, a: Affine) -> Value:
    """This block's share of an affine value but its constant part: coef * partial (see `constant_share`)."""
    return a.partial if a.coef is None else m.kb.scalar("mul", a.coef, a.partial)


def constant_share(m, a: Affine, axis: str, add) -> None:
    """Call `add(const)` in the axis's first block only, on the constant part recomputed there (the ops that make
    it, a residual's loads, cloned into that block's branch; the originals go if nothing else uses them): the other
    shares never read it, and the first adds it after its partial, whose registers are free by then (loaded beside
    the accumulators it raised a split product's from 128 to 145 registers, 8 blocks a multiprocessor to 6)."""
    if a.const is None:
        return
    kb = m.kb
    first = kb.scalar("eq", m.axis(axis), kb.const(0, index))
    with kb.if_(first) as br, br.then():
        cloned: dict[Value, Value] = {}
        ops = _slice(a.const, br.op)
        for op in ops:
            kb.block.append(op.clone(cloned))
        m.recomputed += ops
        add(cloned.get(a.const, a.const))


def _slice(value: Value, branch: Operation) -> list[Operation]:
    """The ops of `branch`'s block that compute `value` and nothing else yet, in order: pure ops and loads of
    global memory (a kernel never writes a buffer it reads, so such a load reads the same anywhere after it)."""
    block = branch.parent

    def movable(op) -> bool:
        if not isinstance(op, Operation) or op.parent is not block or op.regions:
            return False
        return op.has_trait("pure") or (op.name == "kernel.load" and not isinstance(op.operands[0].type, SmemType))

    ops, todo = set(), [value.owner]
    while todo:
        op = todo.pop()
        if movable(op) and op not in ops:
            ops.add(op)
            todo += [v.owner for v in op.operands if isinstance(v.owner, Operation)]
    changed = True
    while changed:  # ops used outside the slice (addresses) are read from the branch, not recomputed
        keep = {op for op in ops if all(u in ops for r in op.results for u in r.users)}
        changed, ops = keep != ops, keep
    return [op for op in block.ops if op in ops]


def combine(m, op: T.CombineOp) -> None:
    if op.over[0] in T.BLOCK_AXES and clusters.via_cluster(op):
        clusters.combine(m, op)
        return
    if op.over[0] in T.BLOCK_AXES:
        m.atomic_axis = op.over[0]
        for r, v in zip(op.results, op.operands):
            m.affine[r] = Affine(m.get(v))
            m.env[r] = m.affine[r].partial
        return
    carriers = [(monoid, [m.get(v) for v in vals]) for monoid, _, vals in op.carriers]
    if op.over == ("threadIdx.y",):
        carriers = _over_warps(m, carriers)
        for r, v in zip(op.results, [v for _, comps in carriers for v in comps]):
            m.env[r] = v
        return
    n = m.tk.axis_size("threadIdx.x")
    if n == 1:  # one thread along x: its carrier is the combine
        for r, v in zip(op.results, op.operands):
            m.env[r] = m.env[v]
        return
    warp = target().warp_size
    if m.tk.threads % warp:  # a partial warp: shuffles need all its lanes, so go through shared memory
        carriers = _through_smem(m, carriers, n, 1)
    else:
        carriers = _butterfly(m, carriers, min(n, warp))
        if n > warp:
            carriers = _through_smem(m, carriers, n // warp, warp)
    for r, v in zip(op.results, [v for _, comps in carriers for v in comps]):
        v.name_hint = value_hint(r) or v.name_hint
        m.env[r] = v


# ---- across the warps of a block ----------------------------------------------------------------------------------
# A reduction sliced among warps (`tile-split-reduce across=warps`): the threads of every row along threadIdx.y hold
# the same points in the same registers (each row of warps runs the same layout on its own share), so the carriers
# fold element by element across the rows: each thread's carriers into shared memory as [row, element, thread]
# (consecutive threads in consecutive banks), one barrier, every thread folding its column's rows in order.
def _why_not_over_warps(kernel: T.KernelOp, op: T.CombineOp) -> str | None:
    if kernel.axis_size("threadIdx.z") > 1:
        return "combines over threadIdx.y in a block with threads along z"
    if any("threadIdx.y" in lp.bind for lp in T.enclosing_loops(op)):
        return "combines over threadIdx.y inside a loop distributed over it"
    return None


def _over_warps(m, carriers):
    kb = m.kb
    rows, width = m.tk.axis_size("threadIdx.y"), m.tk.axis_size("threadIdx.x")
    ty, tx = m.axis("threadIdx.y"), m.axis("threadIdx.x")
    slots = []
    for _, comps in carriers:
        for c in comps:
            shape = c.type.shape if isinstance(c.type, TensorType) else ()
            n = math.prod(shape)
            buf = m.smem(SmemType(element_type(c.type), (rows, n, width)), "partial")
            strides = tuple(math.prod(shape[d + 1 :]) * width for d in range(len(shape))) if shape else None
            kb.store(c, buf, [Val(ty), 0, Val(tx)], strides=strides)
            slots.append((buf, c.type, strides))
    kb.barrier()
    out, at = [], 0
    for monoid, comps in carriers:
        mine = slots[at : at + len(comps)]
        at += len(comps)
        acc = [kb.load(buf, [0, 0, Val(tx)], t, strides=s) for buf, t, s in mine]
        with kb.for_(1, rows, carries=acc, hint="row") as lp:
            got = [kb.load(buf, [Val(lp.iv), 0, Val(tx)], t, strides=s) for buf, t, s in mine]
            lp.yield_(*combine_values(kb, monoid, lp.carries, got))
        out.append((monoid, lp.results))
    kb.barrier()  # the partials are read before a later combine may overwrite them
    return out


def _butterfly(m, carriers, width: int):
    """The xor-shuffle ladder over `width` lanes (offsets width/2 .. 1) as one loop carrying the carriers and the
    offset, unrolled when printed: its combine program appears once in the IR."""
    kb = m.kb
    steps = width.bit_length() - 1
    if steps == 0:
        return carriers
    flat = [c for _, comps in carriers for c in comps]
    first = kb.const(width // 2, index)
    full = target().warp_size
    with kb.for_(0, steps, carries=[*flat, first], hint="step", unroll=0) as lp:
        *cur, off = lp.carries
        off.name_hint = "offset"
        new, at = [], 0
        for monoid, comps in carriers:
            mine = cur[at : at + len(comps)]
            other = [kb.shfl("xor", c, Val(off), width=width if width < full else None) for c in mine]
            new += combine_values(kb, monoid, mine, other)
            at += len(comps)
        lp.yield_(*new, kb.index(Val(off) // 2))
    out, at = [], 0
    for monoid, comps in carriers:
        warp = lp.results[at : at + len(comps)]
        for c, r in zip(comps, warp):
            r.name_hint = f"{c.name_hint}_warp" if c.name_hint else None
        out.append((monoid, warp))
        at += len(comps)
    return out


def _through_smem(m, carriers, slots: int, every: int):
    """The carriers of every `every`-th thread along x (a warp's first lane, or each thread) into shared memory, a
    barrier, then every thread folds its row's `slots` carriers."""
    kb = m.kb
    rows = m.tk.axis_size("threadIdx.y") * m.tk.axis_size("threadIdx.z")
    row = ix.Const(0)
    for a in ("threadIdx.z", "threadIdx.y"):
        row = row * m.tk.axis_size(a) + (Val(m.axis(a)) if m.tk.axis_size(a) > 1 else 0)
    tx = Val(m.axis("threadIdx.x"))
    parts = [[m.smem(SmemType(c.type, (rows, slots)), "partial") for c in comps] for _, comps in carriers]

    def publish():
        for (_, comps), bufs in zip(carriers, parts):
            for c, buf in zip(comps, bufs):
                kb.store(c, buf, [row, tx // every])

    if every > 1:
        lane = kb.index(tx % every, "lane")
        with kb.if_(kb.scalar("eq", lane, kb.const(0, index))) as br, br.then():
            publish()
    else:
        publish()
    kb.barrier()
    out = []
    for (monoid, comps), bufs in zip(carriers, parts):
        types = [c.type for c in comps]
        ids = [kb.const(monoid.identity(t, i), t) for i, t in enumerate(types)]
        with kb.for_(0, slots, carries=ids, hint="k") as lp:
            got = [kb.load(buf, [row, Val(lp.iv)], t) for buf, t in zip(bufs, types)]
            lp.yield_(*combine_values(kb, monoid, lp.carries, got))
        out.append((monoid, lp.results))
    kb.barrier()  # the partials are read before a later combine may overwrite them
    return out
