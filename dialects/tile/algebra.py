"""What a reduction computes, read off its algebra (never off op names): a *contraction* is an `add` reduction
whose element is a product of two factors whose subscripts share the reduced index, and each free index around
it (of the loops distributing the outputs) reaches one factor (an M or N index) or both (a batch index). The
factors may be computed (a prologue: `silu(g) * u` feeding A) and the result may be post-processed (an
epilogue); neither changes the algebra. `mm`, `bmm`, `linear`, attention's two products and a user's einsum are
all found alike.

    c = contraction_of(reduce)      # None when it is no contraction
    c.m, c.n, c.batch               # the free loop indices each kind of output index is
    c.a, c.b                        # the loads of each factor

An `online` carrier is a contraction too when its sums are weighted: the element `(x, w_1, ..., w_k)` stands for
the products `exp(x - m) · w_i`, so A is what `x` reads and B what the weights read (attention's P @ V, with the
scores `x` computed in the element by a reduction of their own: `c.a_reduction`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from irforge.dialects.scalar import CastOp, ConstOp, ScalarMathOp

from irforge import index_expr as ix
from irforge.ir import BlockArgument, Operation, Value

from . import (
    BLOCK_AXES,
    THREAD_AXES,
    CombineOp,
    ForOp,
    IndexOp,
    LoadOp,
    ReduceOp,
    StoreOp,
    YieldOp,
    enclosing_loops,
    linear_terms,
)
from .vectors import expand


@dataclass
class Contraction:
    reduce: ReduceOp
    a: list[LoadOp]  # the loads of the factor that reaches the M indices
    b: list[LoadOp]  # ... the N indices
    m: list[Value] = field(default_factory=list)  # free loop indices only A's subscripts use
    n: list[Value] = field(default_factory=list)  # ... only B's
    batch: list[Value] = field(default_factory=list)  # ... both use

    a_reduction: ReduceOp | None = None  # the reduction computing A's factor inside the element, if any

    @property
    def k(self) -> Value:
        return self.reduce.iv


def _unwrap(v: Value) -> Value:
    """Through casts (accumulation types): the value a cast converts."""
    while isinstance(v.owner, CastOp):
        v = v.owner.operand
    return v


def _slice_loads(v: Value, within: Operation, reductions: list | None = None) -> list[LoadOp] | None:
    """The loads the computation of `v` reads inside `within` (None if it reads a loop's result there, unless
    `reductions` collects the reductions it reads, whose loads count too)."""
    out, seen, todo = [], set(), [v]
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        op = x.owner
        if not isinstance(op, Operation) or not within.is_ancestor_of(op):
            continue
        if isinstance(op, LoadOp):
            out.append(op)
        elif isinstance(op, (ScalarMathOp, CastOp)) or op.name == "scalar.const":
            todo.extend(op.operands)
        elif op.name == "tile.index":
            continue
        elif isinstance(op, CombineOp) and all(a in THREAD_AXES for a in op.over):
            todo.extend(op.operands)  # a reduction the threads share: their partials' combine is its value
        elif isinstance(op, ReduceOp) and reductions is not None and op not in reductions:
            reductions.append(op)
            out += [ld for ld in op.walk() if isinstance(ld, LoadOp)]
        elif not isinstance(op, ReduceOp) or reductions is None:
            return None
    return out


def _indices(loads: list[LoadOp]) -> set:
    return {v for ld in loads for e in ld.index_exprs() for v in _values(expand(e))}


def _values(e) -> set:
    from irforge.dialects.loop.indexing import used_values

    return set(used_values(e))


def contraction_of(reduce: ReduceOp) -> Contraction | None:
    """The contraction `reduce` computes, or None. Every carrier must be an `add` whose element is a product of
    the same two factors' kinds (several carriers: contractions sharing a factor, as gate and up share x)."""
    if not isinstance(reduce, ReduceOp) or not reduce.body.ops or not isinstance(reduce.body.ops[-1], YieldOp):
        return None
    pairs = _factor_pairs(reduce)
    if not pairs:
        return None
    free = [iv for lp in enclosing_loops(reduce) if isinstance(lp, ForOp) for iv in lp.ivs]
    # A block's own indices: a staged slab's box holds them (its loads index the slab without them), an unstaged
    # factor's loads still do, so carriers are matched without them (gate's slab staged, up's left in memory).
    block = {iv for lp in enclosing_loops(reduce) if isinstance(lp, ForOp) and _on_blocks(lp) for iv in lp.ivs}
    k = reduce.iv
    a_loads: list[LoadOp] = []
    b_loads: list[LoadOp] = []
    m_set: set | None = None
    n_set: set | None = None
    reductions: list = []
    for pair in pairs:
        sides = [_slice_loads(x, reduce, reductions if online else None) for x, online in pair]
        if any(s is None or not s for s in sides):
            return None
        idx = [_indices(s) for s in sides]
        if not all(k in i for i in idx):
            return None
        only = [{v for v in free if v in i and v not in j} for i, j in (idx, idx[::-1])]
        if not only[0] and not only[1]:
            return None
        if m_set is not None and (only[0], only[1]) == (n_set, m_set):  # the same two factors, the other way round
            sides, only = sides[::-1], only[::-1]
        if m_set is None:
            m_set, n_set = only
        elif (only[0], only[1]) != (m_set, n_set):
            inner = (only[0] - block, only[1] - block)
            if not all(inner) or inner != (m_set - block, n_set - block):
                return None
            m_set, n_set = m_set | only[0], n_set | only[1]
        a_loads += sides[0]
        b_loads += sides[1]
    both = _indices(a_loads) & _indices(b_loads)
    m_ivs = [v for v in free if v in m_set]
    n_ivs = [v for v in free if v in n_set]
    if not m_ivs or not n_ivs or len(reductions) > 1:
        return None
    c = Contraction(reduce, a_loads, b_loads, m_ivs, n_ivs, [v for v in free if v in both])
    c.a_reduction = reductions[0] if reductions else None
    return c


def _factor_pairs(reduce: ReduceOp) -> list[tuple[tuple[Value, bool], tuple[Value, bool]]] | None:
    """The two factors of each product the carriers sum, each with whether reductions may compute it: the operands
    of each `add` carrier's `mul`; `exp(x - m) · w` for each weighted sum of one `online` carrier (x may be
    computed by a reduction in the element, attention's scores). None when a carrier is neither."""
    carriers = reduce.carriers
    if all(m.name == "add" for m, _, _ in carriers):
        out = []
        for y in reduce.yielded:
            prod = _unwrap(y).owner
            if not (isinstance(prod, ScalarMathOp) and prod.fn == "mul"):
                return None
            out.append(((prod.operands[0], False), (prod.operands[1], False)))
        return out
    if len(carriers) != 1 or carriers[0][0].name != "online":
        return None
    x, *weights = reduce.yielded
    return [((x, True), (w, False)) for w in weights if not isinstance(_unwrap(w).owner, ConstOp)] or None


def _on_blocks(lp: ForOp) -> bool:
    return bool(lp.bind) and all(a in BLOCK_AXES for a in lp.bind)


def contractions_in(op: Operation) -> list[Contraction]:
    return [c for r in op.walk() if isinstance(r, ReduceOp) for c in [contraction_of(r)] if c is not None]


# ---- epilogues ----------------------------------------------------------------------------------------------------
_AFFINE_OPS = {"add", "sub", "mul", "div", "neg"}


def affine_stores(op: CombineOp | ReduceOp) -> str | None:
    """Why the values stored from a combine's (or a reduction's, before a split makes it one over blocks) results
    are not affine functions of them that atomics can add up across blocks (None when they are): `add` carriers of
    f32 or f64, every use on the way to a store an add, sub, mul or div by a value independent of them, a neg, or a
    cast to the same type."""
    over_blocks = isinstance(op, CombineOp) and op.over[0] in BLOCK_AXES
    what = f"combines over {op.over[0]}" if over_blocks else "a split over blocks combines"
    why = f"{what} a carrier whose stores are not an affine function of it"
    if any(m.name != "add" for m, _, _ in op.carriers) or any(r.type.name not in ("f32", "f64") for r in op.results):
        return f"{what} with atomics, which need add carriers of f32 or f64"
    todo, seen = list(op.results), set()
    while todo:
        v = todo.pop()
        for user, i in v.uses:
            if isinstance(user, StoreOp) and user.value is v:
                if user.buffer.type.dtype != v.type:
                    return why
                continue
            if isinstance(user, CastOp) and user.result.type == v.type:
                pass
            elif not (isinstance(user, ScalarMathOp) and user.fn in _AFFINE_OPS):
                return why
            elif user.fn in ("mul", "div") and ((i == 1 and user.fn == "div") or _depends(user.operands[1 - i], op)):
                return why
            elif user.fn in ("add", "sub") and _depends(user.operands[1 - i], op):
                return why
            if id(user) not in seen:
                seen.add(id(user))
                todo.extend(user.results)
    return None


def _depends(v: Value, comb: CombineOp) -> bool:
    todo, seen = [v], set()
    while todo:
        x = todo.pop()
        if x in comb.results:
            return True
        if id(x) in seen or not isinstance(x.owner, Operation):
            continue
        seen.add(id(x))
        todo.extend(x.owner.operands)
    return False


# ---- masks --------------------------------------------------------------------------------------------------------
_IDENTITY = {"online": float("-inf"), "add": 0.0}


def identity_mask(v: Value, monoid: str) -> tuple[Value, bool] | None:
    """(condition, whether it being true selects the identity) when an element component `v` is `select(c, a, b)`
    with the monoid's identity for x (the first component) on one side: a mask (causal attention's)."""
    identity = _IDENTITY.get(monoid)
    sel = v.owner
    if identity is None or not (isinstance(sel, ScalarMathOp) and sel.fn == "select"):
        return None
    cond, a, b = sel.operands
    for side, when in ((a, True), (b, False)):
        if isinstance(side.owner, ConstOp) and side.owner.attributes["value"] == identity:
            return cond, when
    return None


def kept_growth(cond: Value, identity_when: bool) -> dict[Value | None, int] | None:
    """A linear form ({loop index: coefficient}, None the constant) that the elements a mask keeps grow with: `b - a`
    for a mask keeping where `a <= b` (or `a < b`; `>=` and `>` read swapped, `not` flips), None unless the
    condition compares two integers affine in loop indices."""
    o = cond.owner
    if isinstance(o, ScalarMathOp) and o.fn == "not":
        return kept_growth(o.operands[0], not identity_when)
    if not (isinstance(o, ScalarMathOp) and o.fn in ("le", "lt", "ge", "gt")):
        return None
    a, b = (index_form(x) for x in o.operands)
    if a is None or b is None:
        return None
    sign = (1 if o.fn in ("le", "lt") else -1) * (-1 if identity_when else 1)
    return {k: sign * (b.get(k, 0) - a.get(k, 0)) for k in _ordered_keys(a, b)}


def index_form(v: Value) -> dict[Value | None, int] | None:
    """`v` as a linear form over loop indices ({index: coefficient}, None the constant) through integer casts,
    `tile.index` expressions, `add` and `sub`; None where it is not one."""
    from irforge.dialects.loop.indexing import ValueDim

    o = v.owner
    if isinstance(v, BlockArgument):
        return {v: 1}
    if isinstance(o, ConstOp) and type(o.attributes["value"]) is int:
        return {None: o.attributes["value"]}
    if isinstance(o, CastOp) and not o.result.type.is_float and not o.operand.type.is_float:
        return index_form(o.operand)
    if isinstance(o, IndexOp):
        out: dict = {}
        for atom, k in linear_terms(o.index_expr()):
            if isinstance(atom, ix.Const):
                out[None] = out.get(None, 0) + atom.value * k
                continue
            inner = index_form(atom.value) if isinstance(atom, ValueDim) else None
            if inner is None:
                return None
            for key, c in inner.items():
                out[key] = out.get(key, 0) + c * k
        return out
    if isinstance(o, ScalarMathOp) and o.fn in ("add", "sub"):
        x, y = (index_form(u) for u in o.operands)
        if x is None or y is None:
            return None
        s = 1 if o.fn == "add" else -1
        return {k: x.get(k, 0) + s * y.get(k, 0) for k in _ordered_keys(x, y)}
    return None


def _ordered_keys(a: dict, b: dict) -> list:
    """The keys of both forms in order of appearance (a set's order follows the values' ids: the printed program
    would vary from run to run)."""
    return [*a, *(k for k in b if k not in a)]
