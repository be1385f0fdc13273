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


# ---- ranges and range-aware simplification (irforge.index_expr's, over values) ------------------------------------
# An index value that is not a loop index (a looked-up gather index) is only known to be a valid subscript: >= 0.
UNBOUNDED = 1 << 62


def _as_dims(e: IndexExpr, extents):
    """`e` over `Dim`s numbered by first appearance, with each dimension's extent (UNBOUNDED when not known)."""
    order: dict[int, int] = {}
    values: list[Value] = []

    def number(leaf):
        if isinstance(leaf, ValueDim):
            if id(leaf.value) not in order:
                order[id(leaf.value)] = len(values)
                values.append(leaf.value)
            return ix.Dim(order[id(leaf.value)])
        return leaf

    dims = _replace(e, number)
    return dims, values, [extents.get(v, UNBOUNDED) for v in values]


def value_range(e: IndexExpr, extents) -> tuple[int, int] | None:
    """Least and greatest value of `e` when each value leaf `v` ranges over `0 .. extents[v] - 1`; None when a
    leaf has no known extent."""
    dims, values, ext = _as_dims(e, extents)
    if any(v not in extents for v in values):
        return None
    return ix.value_range(dims, ext)


def simplify(e: IndexExpr, extents) -> IndexExpr:
    """`index_expr.simplify` with loop extents: folds what the ranges decide (what reshapes leave behind)."""
    dims, values, ext = _as_dims(e, extents)
    out = ix.simplify(dims, ext)
    return _replace(out, lambda leaf: ValueDim(values[leaf.index]) if isinstance(leaf, ix.Dim) else leaf)
