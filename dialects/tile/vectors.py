"""What a vectorized loop (`vector [V0, V1, ...]`) may hold, and how its accesses move with the lanes.

Materialized, a vectorized loop's lane indices become register-tile dimensions: each value of its body that depends
on a lane index is a tile with that dimension (`docs/dialects/tile.md`, "Register tiles"). That works when the
lane indices only feed subscripts (loads, stores, `tile.index`), each access's element offset moving by a constant
stride per lane (linear in them; or, for lanes in one group, `floordiv`s and `mod`s the group never carries
across), no stage's box moves with a lane, and no store writes several lanes to one address. `why_not`
says what breaks that (lower-to-kernel refuses such a loop; the passes never make one).

`tile-vectorize` wants more than legality: `why_slow` says why a dimension's lanes would not move as one
contiguous, aligned vector access.
"""

from __future__ import annotations

from dataclasses import dataclass

from irforge import index_expr as ix
from irforge.ir import BlockArgument, OpResult, Value

from ..loop.indexing import LoadValueOp, StoreValueOp, ValueDim, leaves, multiple_of
from . import CombineOp, IndexOp, LoadOp, LoopOp, StageOp, StoreOp


def depends(loop: LoopOp, ivs) -> set[Value]:
    """Values of the loop's body that vary with any of `ivs` (the indices themselves included)."""
    out = set(ivs)
    for op in loop.walk():
        if op is not loop and any(v in out for v in op.operands):
            out.update(op.results)
    return out


def expand(e: ix.IndexExpr) -> ix.IndexExpr:
    """`e` with `tile.index` results replaced by their expressions (so the loop indices show)."""
    if isinstance(e, ValueDim):
        owner = e.value.owner
        return expand(owner.index_expr()) if isinstance(owner, IndexOp) else e
    kids = e.children()
    return e.rebuild([expand(k) for k in kids]) if kids else e


def uses(e: ix.IndexExpr, v: Value) -> bool:
    if isinstance(e, ValueDim):
        return e.value is v
    return any(uses(k, v) for k in e.children())


def coefficient(e: ix.IndexExpr, iv: Value, run: int | None = None) -> int | None:
    """The coefficient of `iv` in `e` when `e` is linear in it (None when it is not). With `run`, the constant step
    of `e` along any `run` consecutive values of `iv` from a multiple of `run` (other leaves fixed, at any value):
    also where `e` takes `floordiv` or `mod` of a sum that those values never carry across a multiple of the
    divisor (a reshape's `i floordiv 64`, `i mod 64` with `run` 8); None when that is not provable."""
    if not uses(e, iv):
        return 0
    if isinstance(e, ValueDim):
        return 1
    kids = [coefficient(k, iv, run) for k in e.children()]
    if None in kids:
        return None
    if isinstance(e, (ix.Add, ix.Sub)):
        return kids[0] + kids[1] if isinstance(e, ix.Add) else kids[0] - kids[1]
    if isinstance(e, ix.Mul):
        for k, c in ((kids[0], e.rhs), (kids[1], e.lhs)):
            if isinstance(c, ix.Const):
                return k * c.value
    if kids == [0, 0]:
        return 0
    if isinstance(e, (ix.FloorDiv, ix.Mod)) and run and isinstance(e.rhs, ix.Const) and kids[0] > 0:
        # run values of the dividend from a multiple of step: in one interval of the divisor when it divides it
        step = kids[0] * run
        if e.rhs.value % step == 0 and multiple_of(e.lhs, step, {iv: run}):
            return 0 if isinstance(e, ix.FloorDiv) else kids[0]
    return None


def flat_offset(op) -> ix.IndexExpr:
    """The element offset an access reaches in its buffer (row-major; tile.index expanded)."""
    out: ix.IndexExpr = ix.Const(0)
    for e, n in zip(op.index_exprs(), op.operands[0].type.shape):
        out = out * n + expand(e)
    return out


def why_not(loop: LoopOp, widths=None, split=None) -> str | None:
    """Why `loop` cannot take work items of `widths` (one per dimension, or an int for the innermost; default: its
    own) in lane groups `split` (default: its own, or one group each with `widths`), None when it can."""
    n = len(loop.extents)
    if widths is not None:
        widths = (1,) * (n - 1) + (widths,) if isinstance(widths, int) else tuple(widths)
        for d, (e, w) in enumerate(zip(loop.extents, widths)):
            if e % w:
                where = "innermost" if d == n - 1 else f"dimension {d}'s"
                return f"its {where} extent {e} is not a multiple of {w}"
    else:
        widths, split = loop.vector_shape, loop.layout.split
    split = split or (1,) * n
    ivs = [iv for iv, w in zip(loop.ivs, widths) if w > 1]
    if not ivs:
        return None
    lanes = depends(loop, ivs)
    ops = [op for op in loop.walk() if op is not loop]
    if any(isinstance(op, StageOp) and any(v in lanes for v in op.indices) for op in ops):
        return "a stage's box moves with the vector lanes (a box is one for the whole block)"
    runs = {iv: w for iv, w, g in zip(loop.ivs, widths, split) if w > 1 and g == 1}
    return why_not_follow(ops, ivs, {iv: depends(loop, [iv]) for iv in ivs}, "the index", runs)


def why_not_follow(ops, ivs: list[Value], along: dict[Value, set[Value]], what: str, runs=None) -> str | None:
    """Why the loads and stores among `ops` (of the loop or the tile level) would not follow the lanes of the
    indices `ivs` (`what`, in the message), None when they do: each element offset linear in them (or, along an
    index whose lanes are one run of `runs[iv]` consecutive values, moving by a constant step along each such
    run: `coefficient`), none computed from values that vary with them (`along[iv]`: the values that vary with
    `iv`), and no store of values that vary with one at an address that does not."""
    varying = set().union(*along.values())
    for op in ops:
        if not isinstance(op, (LoadValueOp, StoreValueOp)):
            continue
        offset = flat_offset(op)
        if any(isinstance(x, ValueDim) and x.value in varying and x.value not in ivs for x in leaves(offset)):
            return f"'{op.name}' has a subscript computed from values that vary with {what} (a gather)"
        for iv in ivs:
            run = (runs or {}).get(iv)
            c = coefficient(offset, iv, run)
            if c is None:
                steady = ", nor steps by a constant within each vector" if run else ""
                return f"'{op.name}' has a subscript that is not linear in {what}{steady}"
            if isinstance(op, StoreValueOp) and c == 0 and op.value in along[iv]:
                return f"a store of values that vary with {what} has subscripts that do not"
    return None


def why_slow(loop: LoopOp, d: int, width: int) -> str | None:
    """Why `width` lanes along dimension `d` would not move as contiguous, aligned vectors in every access of the
    loop (None when they would). An access that strides along them but is contiguous along an enclosing loop's
    lanes (a row of B while the reduction's lanes run down its columns) moves as vectors along those."""
    why = why_not(loop, tuple(width if k == d else 1 for k in range(len(loop.extents))))
    if why:
        return why
    iv = loop.ivs[d]
    outer = loop_lanes(loop)
    known = aligned(outer) | {iv: width}
    for op in loop.walk():
        if not isinstance(op, (LoadOp, StoreOp)) or not any(uses(expand(e), iv) for e in op.index_exprs()):
            continue
        src = op.operands[0]
        exprs = [expand(e) for e in op.index_exprs()]
        if isinstance(src.owner, StageOp):  # shared memory: the lanes run along the last dimension
            if any(uses(e, iv) for e in exprs[:-1]):
                return f"'{op.name}' of a staged box moves along a dimension other than the last"
            if src.type.shape[-1] % width:
                return f"'{op.name}' reads a staged box whose rows ({src.type.shape[-1]}) are not a multiple of {width}"
            offset = exprs[-1]
        else:
            offset = flat_offset(op)
        c = coefficient(offset, iv, width)
        run = width if c == 1 else next((known[ld.iv] for ld in outer if ld.stride(offset) == 1), None)
        if run is None:
            return f"'{op.name}' strides by {c} elements per iteration (lanes must be consecutive)"
        if not multiple_of(offset, run, known):
            return f"'{op.name}' starts at offsets that are not multiples of {run} (unaligned vectors)"
    return None


# ---- lane dimensions: what a value of a vectorized loop's body varies along -------------------------------------
@dataclass(frozen=True)
class LaneDim:
    """A dimension some loop's work items are wider than one along: one register-tile dimension, materialized."""

    loop: LoopOp
    dim: int

    @property
    def size(self) -> int:
        return self.loop.vector_shape[self.dim]

    @property
    def iv(self) -> Value:
        return self.loop.ivs[self.dim]

    def stride(self, offset: ix.IndexExpr) -> int | None:
        """The constant step of element offset `offset` from lane to lane: `coefficient`, along the whole run where
        the lanes are one group (groups apart need a linear offset)."""
        one_run = self.loop.layout.split[self.dim] == 1
        return coefficient(offset, self.iv, self.size if one_run else None)


def lane_dim_of(v: Value) -> LaneDim | None:
    """The lane dimension a loop index stands for (None for other values)."""
    if isinstance(v, BlockArgument):
        loop = v.block.parent_op
        if isinstance(loop, LoopOp) and loop.vector_shape[v.index] > 1:
            return LaneDim(loop, v.index)
    return None


def aligned(lanes) -> dict[Value, int]:
    """Divisors of the lane 0 values of the lane dimensions' indices (a group starts at a multiple of its length)."""
    return {ld.iv: ld.loop.layout.groups_len[ld.dim] for ld in lanes}


def loop_lanes(op) -> list[LaneDim]:
    """The lane dimensions of the loops around `op`, outermost first (the register-tile dimensions there)."""
    from . import enclosing_loops

    return [LaneDim(lp, d) for lp in enclosing_loops(op) for d, w in enumerate(lp.vector_shape) if w > 1]


class Lanes:
    """Which lane dimensions each value varies along (`of`), cached: a load along the lanes its subscripts move
    with, a reduction's result along its element's minus its own, anything else along its operands'."""

    def __init__(self):
        self.cache: dict[Value, frozenset] = {}

    def of(self, v: Value) -> frozenset:
        got = self.cache.get(v)
        if got is not None:
            return got
        ld = lane_dim_of(v)
        if ld is not None:
            got = frozenset({ld})
        elif not isinstance(v, OpResult):
            got = frozenset()
        else:
            op = v.op
            if isinstance(op, LoadOp):
                offset = flat_offset(op)
                got = frozenset(ld for ld in loop_lanes(op) if ld.stride(offset) != 0)
            elif isinstance(op, LoopOp):
                # A component varies along what the components its combine reads vary along (the online sums
                # along the max's lanes and their own, the max along its own only).
                own = {LaneDim(op, d) for d in range(len(op.extents))}
                parts = read_components(op.carriers, [len(r) for _, _, r in op.carriers], op.yielded, v.index)
                got = frozenset().union(*(self.of(y) for y in parts)) - own
            elif isinstance(op, CombineOp):
                parts = read_components(op.carriers, [w for _, w, _ in op.carriers], op.operands, v.index)
                got = frozenset().union(*(self.of(x) for x in parts))
            else:
                got = frozenset().union(*(self.of(x) for x in op.operands))
        self.cache[v] = got
        return got


def read_components(carriers, widths: list[int], values, index: int) -> list[Value]:
    """The values (one per component, carriers in order) that component `index` of the carriers' combine reads."""
    at = 0
    for (monoid, *_), width in zip(carriers, widths):
        if index < at + width:
            return [values[at + i] for i in monoid.component_inputs(width)[index - at]]
        at += width
    raise IndexError(index)
