"""Index expressions over SSA values, for passes that build and rewrite loads, stores and `loop.index`.

In the IR an op's index expressions are an `AffineMap` whose dimension `i` is the op's `i`-th index operand,
numbered by first appearance in the printed text (what `parser.bind_index_values` produces), so that
`parse(print(m)) == m`. Passes work with expressions whose leaves are the values themselves (`ValueDim`), built
with Python operators (`iv * 64 + c`), and turn them back into a map and an operand list with `canonical`.
`simplify` uses loop ranges to fold `floordiv`/`mod` that the bounds decide (what reshapes leave behind).
"""

from __future__ import annotations

from dataclasses import dataclass

from irforge import index_expr as ix
from irforge.index_expr import AffineMap, IndexExpr
from irforge.ir import Value


@dataclass(frozen=True, slots=True)
class ValueDim(IndexExpr):
    """A leaf standing for an SSA value of type `index` (compared by identity)."""

    value: Value

    def evaluate(self, dims):
        return dims[self.value]

    def format(self, leaf=None) -> str:
        return f"%{self.value.name_hint or '?'}"


def value_exprs(index: AffineMap, operands) -> list[IndexExpr]:
    """The map's results with each dimension replaced by the operand it stands for."""
    leaves = [ValueDim(v) for v in operands]
    return [_replace(e, lambda d: leaves[d.index] if isinstance(d, ix.Dim) else d) for e in index.results]


def canonical(exprs) -> tuple[AffineMap, list[Value]]:
    """(map, operands) for expressions over `ValueDim`s: operands numbered by first appearance, left to right."""
    slot: dict[int, int] = {}
    operands: list[Value] = []

    def number(leaf):
        if isinstance(leaf, ValueDim):
            key = id(leaf.value)
            if key not in slot:
                slot[key] = len(operands)
                operands.append(leaf.value)
            return ix.Dim(slot[key])
        if isinstance(leaf, ix.Dim):
            raise ValueError("canonical() takes expressions over values, not bare dimensions")
        return leaf

    results = tuple(_replace(ix.as_expr(e), number) for e in exprs)
    return AffineMap(len(operands), results), operands


def substitute(e: IndexExpr, repl) -> IndexExpr:
    """Replace value leaves found in `repl` (a dict Value -> expression), simplifying as it goes."""

    def go(x):
        if isinstance(x, ValueDim):
            return ix.as_expr(repl.get(x.value, x))
        kids = x.children()
        if not kids:
            return x
        return ix._SIMPLIFY[type(x)](*(go(k) for k in kids))

    return go(e)


def leaves(e: IndexExpr):
    kids = e.children()
    if not kids:
        yield e
    for k in kids:
        yield from leaves(k)


def used_values(e: IndexExpr) -> list[Value]:
    return [x.value for x in leaves(e) if isinstance(x, ValueDim)]


def _replace(e: IndexExpr, fn) -> IndexExpr:
    """Rebuild `e` exactly (no simplification), mapping every leaf through `fn`."""
    kids = e.children()
    if not kids:
        return fn(e)
    return e.rebuild([_replace(k, fn) for k in kids])


# ---- range-aware simplification --------------------------------------------------------------------------------
def bounds(e: IndexExpr, ranges) -> tuple[int, int] | None:
    """Inclusive (lo, hi) of `e` when each value leaf lies in `ranges[value]` = (lo, hi); None if unknown."""
    if isinstance(e, ix.Const):
        return (e.value, e.value)
    if isinstance(e, ValueDim):
        return ranges.get(e.value)
    kids = [bounds(k, ranges) for k in e.children()]
    if any(k is None for k in kids):
        return None
    (a, b), (c, d) = kids
    if isinstance(e, ix.Add):
        return (a + c, b + d)
    if isinstance(e, ix.Sub):
        return (a - d, b - c)
    if isinstance(e, ix.Mul):
        ps = (a * c, a * d, b * c, b * d)
        return (min(ps), max(ps))
    if isinstance(e, (ix.FloorDiv, ix.CeilDiv)) and c == d and c > 0:
        f = (lambda x: x // c) if isinstance(e, ix.FloorDiv) else (lambda x: -(-x // c))
        return (f(a), f(b))
    if isinstance(e, ix.Mod) and c == d and c > 0:
        return (a, b) if 0 <= a and b < c else (0, c - 1)
    if isinstance(e, ix.Min):
        return (min(a, c), min(b, d))
    if isinstance(e, ix.Max):
        return (max(a, c), max(b, d))
    return None


def simplify(e: IndexExpr, ranges) -> IndexExpr:
    """Fold what the ranges decide: `(q*c + r) floordiv c -> q` and `(q*c + r) mod c -> r` for 0 <= r < c,
    `x floordiv c -> 0` and `x mod c -> x` for 0 <= x < c, `min`/`max` whose order the bounds fix."""
    kids = e.children()
    if not kids:
        return e
    kids = [simplify(k, ranges) for k in kids]
    e = ix._SIMPLIFY[type(e)](*kids)
    if isinstance(e, (ix.FloorDiv, ix.Mod)) and isinstance(e.rhs, ix.Const) and e.rhs.value > 0:
        c = e.rhs.value
        b = bounds(e.lhs, ranges)
        if b is not None and 0 <= b[0] and b[1] < c:
            return ix.Const(0) if isinstance(e, ix.FloorDiv) else e.lhs
        split = _split_multiple(e.lhs, c, ranges)
        if split is not None:
            q, r = split
            return q if isinstance(e, ix.FloorDiv) else r
    if isinstance(e, (ix.Min, ix.Max)):
        bl, br = bounds(e.lhs, ranges), bounds(e.rhs, ranges)
        if bl is not None and br is not None:
            if bl[1] <= br[0]:
                return e.lhs if isinstance(e, ix.Min) else e.rhs
            if br[1] <= bl[0]:
                return e.rhs if isinstance(e, ix.Min) else e.lhs
    return e


def _split_multiple(e: IndexExpr, c: int, ranges) -> tuple[IndexExpr, IndexExpr] | None:
    """(q, r) with e == q*c + r and 0 <= r < c, when e is a sum whose terms are multiples of c plus a small rest."""
    terms = list(_terms(e))
    q_terms, r_terms = [], []
    for t in terms:
        k = _multiple_of(t, c)
        if k is not None:
            q_terms.append(k)
        else:
            r_terms.append(t)
    if not q_terms:
        return None
    r = ix.Const(0)
    for t in r_terms:
        r = r + t
    b = bounds(r, ranges)
    if b is None or b[0] < 0 or b[1] >= c:
        return None
    q = ix.Const(0)
    for t in q_terms:
        q = q + t
    return q, r


def _terms(e: IndexExpr):
    if isinstance(e, ix.Add):
        yield from _terms(e.lhs)
        yield from _terms(e.rhs)
    else:
        yield e


def _multiple_of(t: IndexExpr, c: int) -> IndexExpr | None:
    """t / c when t is visibly a multiple of c (`x * k` with c | k, or a constant), else None."""
    if isinstance(t, ix.Const):
        return ix.Const(t.value // c) if t.value % c == 0 else None
    if isinstance(t, ix.Mul) and isinstance(t.rhs, ix.Const) and t.rhs.value % c == 0:
        return t.lhs * (t.rhs.value // c)
    return None
