"""lower-to-kernel's rule for a reduction whose elements a mask turns into the identity: a trip of it that no
element of the block's may escape the mask is skipped (causal attention's chunks of keys above the diagonal of a
block's query rows: their scores are all -inf, the online carrier's identity).

The mask is found in the element, not by name: each carrier's element must be a `select` between a value and the
monoid's identity (`online`: its x component -inf, whatever its weights; `add`: 0) on one condition. The condition
is bounded by interval arithmetic: loop indices of the reduction itself and of the loops on threads around it
range over their whole extent (so the answer is the same for every thread of the block, which the combines inside
need), the indices of the other loops around it are their values; index arithmetic, integer casts, comparisons
and `and`/`or`/`not` keep bounds, anything else gives up. Skipping is then a loop bound of 0 trips.
"""

from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.kernel.builder import Val
from irforge.dialects.scalar import ConstOp, ScalarMathOp
from irforge.dialects.tile.algebra import identity_mask, index_form

from irforge import index_expr as ix
from irforge.ir import BlockArgument, Value
from irforge.types import boolean, index

from .emit import value_hint


def trips(m, op: T.ReduceOp) -> Value | None:
    """The number of trips of `op` this block makes (a kernel index: its work items, or 0 where the mask covers
    every element), or None where no mask bounds it. Only for a reduction no thread axis deals, holding no stage."""
    skip = skipped(m, op)
    if skip is None:
        return None
    kb = m.kb
    return kb.scalar("select", skip, kb.const(0, index), kb.const(op.work_items, index))


def chunk_trips(m, op: T.ReduceOp) -> Value | None:
    """The trips a loop of chunks (`lower_to_kernel._chunk`) makes: up to its last chunk that the mask leaves an
    element of for this block, a kernel index counted over its trips before it starts (None where no mask bounds
    the chunks). Later trips would only skip their folds, after copying their stages' slabs: causal attention's
    chunks of keys past the diagonal."""
    from .lower_to_kernel import _chunk

    inner = _chunk(op)
    if inner is None or op.bind or op.vector > 1 or op.work_items != op.extents[0]:
        return None
    kb = m.kb
    m.env[op.ivs[0]] = kb.const(0, index)
    if skipped(m, inner) is None:  # what it built is dead: dce drops it
        return None
    with kb.for_(0, op.work_items, carries=[kb.const(0, index)], hint="t") as lp:
        m.env[op.ivs[0]] = lp.iv
        last = kb.scalar("add", lp.iv, kb.const(1, index))
        lp.yield_(kb.scalar("select", skipped(m, inner), lp.carries[0], last))
    return lp.results[0]


def kept(m, op: T.ReduceOp) -> tuple[Value, Value] | None:
    """(a kernel bool, true where the mask keeps every element of `op` for this block; the value it keeps) for a
    reduction of one carrier whose key the mask selects (None where no mask bounds it): a chunk below the diagonal
    of causal attention need not evaluate its mask."""
    if op.bind or op.vector > 1 or len(op.carriers) != 1:
        return None
    bounded = _bounded_mask(m, op, op.yielded[0], op.carriers[0][0].name)
    if bounded is None:
        return None
    truth, identity_when = bounded
    _, a, b = op.yielded[0].owner.operands
    return (truth[1], b) if identity_when else (truth[0], a)


def fold_unless_skipped(m, op: T.ReduceOp, inits: list[Value], fold) -> None:
    """Materialize the reduction `op` from the carrier `inits` by `fold(m, op, inits)` (its results), under a
    `kernel.if` that passes the carrier through where the mask covers every element (`skipped`)."""
    kb = m.kb
    skip = skipped(m, op) if m.skip_masked else None
    if skip is None:
        out = fold(m, op, inits)
    else:
        with kb.if_(kb.scalar("not", skip), [v.type for v in inits]) as br:
            with br.then():
                br.yield_(*fold(m, op, inits))
            with br.otherwise():
                br.yield_(*inits)
        out = br.results
    for r, v in zip(op.results, out):
        v.name_hint = value_hint(r)
        m.env[r] = v


def skipped(m, op: T.ReduceOp) -> Value | None:
    """A kernel bool, true where the mask covers every element of `op` for this block (None where no mask bounds
    it); `trips`' conditions."""
    if op.bind or op.vector > 1 or any(isinstance(x, T.StageOp) for x in op.walk()):
        return None
    skip = None
    at = 0
    for monoid, _, results in op.carriers:
        bounded = _bounded_mask(m, op, op.yielded[at], monoid.name)
        at += len(results)
        if bounded is None:
            return None
        truth, identity_when = bounded
        always = truth[0] if identity_when else truth[1]  # the mask picks the identity for every element
        skip = always if skip is None else m.kb.scalar("and", skip, always)
    return skip


def _bounded_mask(m, op: T.ReduceOp, v: Value, monoid: str) -> tuple[tuple[Value, Value], bool] | None:
    """((always true, always false) of the mask's condition over `op`'s elements and the block, whether it being
    true selects the identity) for an element component `v` a mask selects (None where none bounds it)."""
    masked = identity_mask(v, monoid)
    if masked is None:
        return None
    cond, identity_when = masked
    truth = _Bounds(m, op).truth(cond)
    return None if truth is None else (truth, identity_when)


class _Bounds:
    """Lower and upper bounds (index expressions over kernel values) of tile index values, and for conditions the
    kernel bools (always true, always false), over the trips of `op` and the block's threads."""

    def __init__(self, m, op: T.ReduceOp):
        self.m, self.op = m, op

    def truth(self, v: Value) -> tuple[Value, Value] | None:
        kb = self.m.kb
        o = v.owner
        if isinstance(o, ConstOp) and v.type == boolean:
            yes = kb.const(bool(o.attributes["value"]), boolean)
            return yes, kb.scalar("not", yes)
        if not isinstance(o, ScalarMathOp):
            return None
        if o.fn == "not":
            t = self.truth(o.operands[0])
            return None if t is None else (t[1], t[0])
        if o.fn in ("and", "or"):
            a, b = (self.truth(x) for x in o.operands)
            if a is None or b is None:
                return None
            both, either = (lambda x, y: kb.scalar("and", x, y)), (lambda x, y: kb.scalar("or", x, y))
            if o.fn == "and":
                return both(a[0], b[0]), either(a[1], b[1])
            return either(a[0], b[0]), both(a[1], b[1])
        if o.fn in ("le", "lt", "ge", "gt"):
            a, b = (self.bounds(x) for x in o.operands)
            if a is None or b is None:
                return None
            if o.fn in ("ge", "gt"):
                a, b = b, a  # b <= a, b < a
            le = lambda x, y: kb.scalar("le", kb.index(x), kb.index(y))
            lt = lambda x, y: kb.scalar("lt", kb.index(x), kb.index(y))
            if o.fn in ("le", "ge"):
                return le(a[1], b[0]), lt(b[1], a[0])
            return lt(a[1], b[0]), le(b[1], a[0])
        return None

    def bounds(self, v: Value) -> tuple[ix.IndexExpr, ix.IndexExpr] | None:
        """(lower, upper) of an integer value affine in loop indices (`algebra.index_form`), each index over its
        range (`_loop_index`)."""
        form = index_form(v)
        if form is None:
            return None
        lo: ix.IndexExpr = ix.Const(form.pop(None, 0))
        hi: ix.IndexExpr = lo
        for iv, k in form.items():
            b = self._loop_index(iv)
            if b is None:
                return None
            lo, hi = (lo + b[0] * k, hi + b[1] * k) if k >= 0 else (lo + b[1] * k, hi + b[0] * k)
        return lo, hi

    def _loop_index(self, v: BlockArgument) -> tuple[ix.IndexExpr, ix.IndexExpr] | None:
        loop = v.block.parent_op
        if not isinstance(loop, T.LoopOp) or v not in loop.ivs:
            return None
        whole = loop is self.op or (
            loop.is_ancestor_of(self.op) and any(a in T.THREAD_AXES for a in loop.bind)
        )  # the block's threads, and the trips, range over all of it
        if whole:
            return ix.Const(0), ix.Const(loop.extents[loop.ivs.index(v)] - 1)
        if not loop.is_ancestor_of(self.op) or loop.vector > 1:
            return None
        value = Val(self.m.env[v])
        return value, value
