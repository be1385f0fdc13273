"""Index expressions over SSA values, for passes that build and rewrite loads, stores and `loop.index`; and the
base classes and checks of the ops the loop and tile levels share (buffer subscripts, `index` values,
reductions).

In the IR an op's index expressions are an `AffineMap` whose dimension `i` is the op's `i`-th index operand,
numbered by first appearance in the printed text (what `parser.bind_index_values` produces), so that
`parse(print(m)) == m`. Passes work with expressions whose leaves are the values themselves (`ValueDim`), built
with Python operators (`iv * 64 + c`), and turn them back into a map and an operand list with `canonical`.
`simplify` uses loop ranges to fold `floordiv`/`mod` that the bounds decide (what reshapes leave behind).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from irforge import index_expr as ix
from irforge.attributes import SymbolRef
from irforge.index_expr import AffineMap, IndexExpr
from irforge.ir import Operation, Value
from irforge.location import UNKNOWN
from irforge.scalar_ops import MONOIDS
from irforge.types import ScalarType, TensorType, index


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
    """`index_expr.simplify` with loop extents: folds what the ranges decide (what reshapes leave behind).

    Repeated to a fixpoint: terms are ordered by their values' numbering, which is by first appearance, and a
    simplified expression can number them differently than its input did (a pass must not change its own output
    when run again)."""
    for _ in range(8):
        dims, values, ext = _as_dims(e, extents)
        out = ix.simplify(dims, ext)
        out = _replace(out, lambda leaf, vs=values: ValueDim(vs[leaf.index]) if isinstance(leaf, ix.Dim) else leaf)
        if out == e:
            break
        e = out
    return e


def multiple_of(e: IndexExpr, k: int, known: dict | None = None) -> bool:
    """Whether `e` is a multiple of `k` for every value of its leaves (a sufficient, structural test); `known`
    gives divisors of some leaf values."""
    if k == 1:
        return True
    if isinstance(e, ix.Const):
        return e.value % k == 0
    if isinstance(e, ValueDim):
        return (known or {}).get(e.value, 1) % k == 0
    if isinstance(e, (ix.Add, ix.Sub)):
        return multiple_of(e.lhs, k, known) and multiple_of(e.rhs, k, known)
    if isinstance(e, ix.Mul):
        for c, x in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if isinstance(c, ix.Const):
                return multiple_of(x, k // math.gcd(k, c.value), known)
        return multiple_of(e.lhs, k, known) or multiple_of(e.rhs, k, known)
    if not (isinstance(e, (ix.Mod, ix.FloorDiv)) and isinstance(e.rhs, ix.Const) and e.rhs.value > 0):
        return False
    if isinstance(e, ix.Mod):  # x - c * (x floordiv c): both terms multiples of k
        return e.rhs.value % k == 0 and multiple_of(e.lhs, k, known)
    return multiple_of(e.lhs, k * e.rhs.value, known)  # x a multiple of c * k: x floordiv c = x / c


def as_value_expr(e) -> IndexExpr:
    """A Value as its `ValueDim` leaf; an int or expression as is."""
    return ValueDim(e) if isinstance(e, Value) else ix.as_expr(e)


class KernelBase(Operation):
    """Base of `loop.kernel` and `tile.kernel`: the op the queries below stop at."""


class LoopBase(Operation):
    """Base of the loop and tile levels' loops: one index per dimension (`ivs`), each from 0 to its `extents`."""

    @property
    def ivs(self) -> list[Value]:
        return list(self.body.args)

    @property
    def extents(self) -> tuple[int, ...]:
        raise NotImplementedError


def verify_carriers(op: Operation, monoids, widths, types) -> None:
    """The carriers of a reduction or a combine: known monoids, each with its number (`widths`) of scalar
    components of types it takes, together the `types` given."""
    at = 0
    for name, width in zip(monoids, widths):
        m = MONOIDS.get(name) if isinstance(name, str) else None
        if m is None:
            raise op.error(f"unknown monoid {name!r}; monoids are {', '.join(MONOIDS)}")
        why = m.check_width(width)
        if why:
            raise op.error(why)
        ts = types[at : at + width]
        if len(ts) != width:
            raise op.error(f"has {len(types)} carrier value(s) but its monoids need more")
        for t in ts:
            if not isinstance(t, ScalarType):
                raise op.error(f"carriers are scalars, got {t}")
        why = m.check_types(list(ts))
        if why:
            raise op.error(why)
        at += width
    if at != len(types):
        raise op.error(f"has {len(types)} carrier value(s) but its monoids take {at}")


def verify_reduction(op: LoopBase, yield_cls: type, store_cls: type) -> None:
    """A reduction of the loop or tile level: one init tuple per monoid, fitting its carriers (the results), a body
    that ends by yielding one element of the carriers' types and stores nothing."""
    monoids, init = op.attributes["monoids"], op.attributes["init"]
    if len(monoids) != len(init) or not monoids:
        raise op.error("needs one init tuple per monoid, and at least one monoid")
    for name, values in zip(monoids, init):
        if not isinstance(values, tuple):
            raise op.error(f"init of '{name}' must be a list of values")
    verify_carriers(op, monoids, [len(values) for values in init], [r.type for r in op.results])
    at = 0
    for name, values in zip(monoids, init):
        for v, r in zip(values, op.results[at : at + len(values)]):
            if not r.type.holds(v):
                raise op.error(f"init {v!r} of '{name}' does not fit its {r.type} carrier")
        at += len(values)
    term = op.body.ops[-1] if op.body.ops else None
    if not isinstance(term, yield_cls):
        raise op.error(f"body must end with {yield_cls.name}")
    got = [v.type for v in term.operands]
    want = [r.type for r in op.results]
    if got != want:
        raise term.error(f"yields ({', '.join(map(str, got))}) but the reduction carries ({', '.join(map(str, want))})")
    for inner in op.walk():
        if isinstance(inner, store_cls):
            raise inner.error(f"cannot be inside a {op.name} (a reduction's body only computes its elements)")


def kernel_of(op: Operation) -> KernelBase | None:
    """The kernel `op` is in (`op` itself when it is one)."""
    if isinstance(op, KernelBase):
        return op
    return next((a for a in op.ancestors() if isinstance(a, KernelBase)), None)


def enclosing_loops(op: Operation) -> list[LoopBase]:
    """Loops around `op`, outermost first, up to its kernel."""
    out = []
    for a in op.ancestors():
        if isinstance(a, KernelBase):
            break
        if isinstance(a, LoopBase):
            out.append(a)
    return out[::-1]


def loop_extents(op: Operation) -> dict:
    """{loop index: extent} for the loops around `op` (each index ranges over 0 .. extent - 1)."""
    return {iv: e for lp in enclosing_loops(op) for iv, e in zip(lp.ivs, lp.extents)}


# ---- ops the loop and tile levels share --------------------------------------------------------------------------
class FunctionBufferOp(Operation):
    """Base of the buffers a function of kernels holds, directly in the `func.func`: `<dialect>.buffer T` (one the
    program allocates) and `<dialect>.param @name : T` (a weight from the param store)."""

    operand_names = ()
    result_names = ("result",)
    num_regions = 0

    def verify_(self):
        from irforge.builtin import FuncOp

        if not isinstance(self.parent_op, FuncOp):
            raise self.error("must be directly inside a func.func")
        if not isinstance(self.result.type, TensorType):
            raise self.error(f"holds a tensor, not {self.result.type}")


class BufferValueOp(FunctionBufferOp):
    """A buffer the program allocates: an intermediate, or an output when the function returns it."""

    @classmethod
    def build(cls, t: TensorType, hint: str | None = None, loc=UNKNOWN):
        return cls((), [t], {}, loc=loc, result_hints=[hint])

    def print_custom(self, p):
        if self.attributes:
            return p.print_generic(self)
        p.write(self.name, " ", p.type(self.result.type))


class ParamValueOp(FunctionBufferOp):
    """A named, read-only buffer whose value lives in the program's param store (a weight)."""

    attribute_types = {"sym": SymbolRef}

    @classmethod
    def build(cls, sym: str, t: TensorType, hint: str | None = None, loc=UNKNOWN):
        return cls((), [t], {"sym": SymbolRef(sym)}, loc=loc, result_hints=[hint])

    def print_custom(self, p):
        if set(self.attributes) != {"sym"}:
            return p.print_generic(self)
        p.write(self.name, " ", str(self.attributes["sym"]), " : ", p.type(self.result.type))


class SubscriptOp(Operation):
    """Base of the ops that address a buffer, `%buffer[e0, e1, ...]` (the buffer is operand 0): an `index` map over
    SSA index values. `kernel()` (the kernel around it) and `extents()` (its loops' ranges) are what the subscript's
    bounds check needs."""

    def kernel(self) -> KernelBase | None:
        return kernel_of(self)

    def extents(self) -> dict:
        return loop_extents(self)

    def index_exprs(self) -> list[IndexExpr]:
        """The subscripts as expressions over the index values (`ValueDim` leaves)."""
        return value_exprs(self.attributes["index"], self.indices)

    def verify_subscript(self, room=None, what: str = "subscript") -> None:
        """Types, arity, and every subscript's range inside the buffer; `room`: elements accessed from each
        subscript on (a box's shape), 1 by default."""
        buf = self.operands[0]
        if not isinstance(buf.type, TensorType):
            raise self.error(f"needs a buffer (tensor) operand, got {buf.type}")
        m = self.attributes["index"]
        if not isinstance(m, AffineMap) or m.num_dims != len(self.indices):
            raise self.error("index map must have one dimension per index operand")
        if len(m.results) != buf.type.rank:
            raise self.error(f"has {len(m.results)} subscript(s) for a rank-{buf.type.rank} buffer")
        for v in self.indices:
            if v.type != index:
                raise self.error(f"subscripts are index values, got {v.type}")
        if self.kernel() is None:
            raise self.error(f"must be inside a {self.dialect}.kernel")
        extents = self.extents()
        if 0 in extents.values():
            return  # never runs
        # Over the map's own dimensions: interval arithmetic bounds each leaf on its own, so this is the range
        # `value_range` finds over the values, without rebuilding each subscript around them (verification is hot).
        ext = [extents.get(v) for v in self.indices]
        for k, (e, size, r) in enumerate(zip(m.results, buf.type.shape, room or (1,) * buf.type.rank)):
            known = all(ext[d.index] is not None for d in leaves(e) if isinstance(d, ix.Dim))
            b = ix.value_range(e, ext) if known else None
            if b is not None and (b[0] < 0 or b[1] + r - 1 >= size):
                raise self.error(f"{what} {k} ranges over {b[0]}..{b[1] + r - 1}, outside 0..{size - 1}")

    def subscript(self, p) -> str:
        m = self.attributes["index"]
        return "[" + ", ".join(p.index_expr(e, self.indices) for e in m.results) + "]"


class LoadValueOp(SubscriptOp):
    """Read one element of a buffer: `<dialect>.load %buffer[e0, ...]` (a level's subclass adds its hooks)."""

    operand_names = ("buffer", "*indices")
    result_names = ("result",)
    attribute_types = {"index": AffineMap}
    num_regions = 0
    traits = frozenset({"pure"})  # a kernel never writes what it reads

    @classmethod
    def build(cls, buffer, exprs, hint: str | None = None, loc=UNKNOWN):
        """`exprs`: one subscript per dimension, over values (`ValueDim`s, or Values, or ints)."""
        m, ops = canonical([as_value_expr(e) for e in exprs])
        return cls([buffer, *ops], [buffer.type.dtype], {"index": m}, loc=loc, result_hints=[hint])

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        if not isinstance(operand_types[0], TensorType):
            raise ValueError(f"it loads from a buffer (a tensor), not from a value of type {operand_types[0]}")
        return [operand_types[0].dtype]

    def verify_(self):
        self.verify_subscript()
        if self.result.type != self.buffer.type.dtype:
            raise self.error(f"loads {self.buffer.type.dtype}, not {self.result.type}")

    def print_custom(self, p):
        if set(self.attributes) != {"index"}:
            return p.print_generic(self)
        p.write(f"{self.name} ", p.value(self.buffer), self.subscript(p))


class StoreValueOp(SubscriptOp):
    """Write one element of a buffer: `<dialect>.store %buffer[e0, ...] = %v`."""

    operand_names = ("buffer", "*indices", "value")
    result_names = ()
    attribute_types = {"index": AffineMap}
    num_regions = 0

    @classmethod
    def build(cls, buffer, exprs, value, loc=UNKNOWN):
        m, ops = canonical([as_value_expr(e) for e in exprs])
        return cls([buffer, *ops, value], [], {"index": m}, loc=loc)

    def verify_(self):
        self.verify_subscript()
        if self.value.type != self.buffer.type.dtype:
            raise self.error(f"stores {self.value.type} into a {self.buffer.type.dtype} buffer")

    def print_custom(self, p):
        if set(self.attributes) != {"index"}:
            return p.print_generic(self)
        p.write(f"{self.name} ", p.value(self.buffer), self.subscript(p), " = ", p.value(self.value))


class IndexValueOp(Operation):
    """An index value computed from others: `<dialect>.index %a0 * 64 + %a1` (a subscript, named)."""

    operand_names = ("*indices",)
    result_names = ("result",)
    attribute_types = {"expr": AffineMap}
    num_regions = 0
    traits = frozenset({"pure"})

    @classmethod
    def build(cls, expr, hint: str | None = None, loc=UNKNOWN):
        m, ops = canonical([as_value_expr(expr)])
        return cls(ops, [index], {"expr": m}, loc=loc, result_hints=[hint])

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        return [index]

    def index_expr(self) -> IndexExpr:
        return value_exprs(self.attributes["expr"], self.indices)[0]

    def verify_(self):
        m = self.attributes["expr"]
        if m.num_dims != len(self.indices) or len(m.results) != 1:
            raise self.error("needs one expression with one dimension per operand")
        for v in self.indices:
            if v.type != index:
                raise self.error(f"computes from index values, got {v.type}")
        if self.result.type != index:
            raise self.error("result must be index")

    def print_custom(self, p):
        if set(self.attributes) != {"expr"}:
            return p.print_generic(self)
        p.write(f"{self.name} ", p.index_expr(self.attributes["expr"].results[0], self.indices))
