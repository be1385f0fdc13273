"""Building loop IR from Python: an insertion point that makes scalar ops, loads, stores and loops.

    b = Builder.at_end(kernel.body)
    i, body = b.for_(16, "a0")          # body: a Builder inside the new loop
    x = body.load(buf, [i])
    body.store(out, [i], body.scalar("exp", x))

Lifting, the fusion passes and the tests' program generators all build through it, so every kernel they make is
canonical (index operands numbered by first appearance, result types from the scalar op table).
"""

from __future__ import annotations

from irforge.ir import Block, Operation, Value
from irforge.location import UNKNOWN, Location
from irforge.scalar_ops import SCALAR_OPS
from irforge.types import ScalarType

from ..scalar import MATH_OP_BY_FN, CastOp, ConstOp
from . import ForOp, IndexOp, LoadOp, ReduceOp, StoreOp, YieldOp


class Builder:
    """Inserts ops into a block: at its end, or before a given op."""

    def __init__(self, block: Block, before: Operation | None = None, loc: Location = UNKNOWN):
        self.block = block
        self.before = before
        self.loc = loc

    @staticmethod
    def at_end(block: Block, loc: Location = UNKNOWN) -> Builder:
        return Builder(block, None, loc)

    @staticmethod
    def before_op(op: Operation, loc: Location | None = None) -> Builder:
        return Builder(op.parent, op, op.loc if loc is None else loc)

    def insert(self, op: Operation) -> Operation:
        if self.before is None:
            self.block.append(op)
        else:
            self.block.insert_before(self.before, op)
        return op

    # ---- scalars ------------------------------------------------------------------------------------------------
    def const(self, value, dtype: ScalarType, hint: str | None = None) -> Value:
        op = ConstOp.build(value, dtype, self.loc)
        op.results[0].name_hint = hint
        return self.insert(op).result

    def scalar(self, fn: str, *args: Value, hint: str | None = None) -> Value:
        """`scalar.<fn>` of the arguments; the result type comes from the scalar op table."""
        t = SCALAR_OPS[fn].result_type([a.type for a in args])
        return self.insert(MATH_OP_BY_FN[fn](list(args), [t], {}, loc=self.loc, result_hints=[hint])).result

    def cast(self, v: Value, dtype: ScalarType, hint: str | None = None) -> Value:
        if v.type == dtype:
            return v
        return self.insert(CastOp([v], [dtype], {}, loc=self.loc, result_hints=[hint])).result

    # ---- memory and indices -------------------------------------------------------------------------------------
    def load(self, buffer: Value, exprs, hint: str | None = None) -> Value:
        return self.insert(LoadOp.build(buffer, exprs, hint, self.loc)).result

    def store(self, buffer: Value, exprs, value: Value) -> StoreOp:
        return self.insert(StoreOp.build(buffer, exprs, value, self.loc))

    def index(self, expr, hint: str | None = None) -> Value:
        return self.insert(IndexOp.build(expr, hint, self.loc)).result

    # ---- loops --------------------------------------------------------------------------------------------------
    def for_(self, extent: int, hint: str | None = None) -> tuple[Value, Builder]:
        """A free loop over 0..extent; returns its index and a builder for its body."""
        op = self.insert(ForOp.build(extent, hint, self.loc))
        return op.iv, Builder(op.body, None, self.loc)

    def reduce(self, extent: int, carriers, types, hint=None, result_hints=None):
        """A reduce loop over 0..extent; returns (op, its index, a builder for its body). Finish it with `yield_`."""
        op = self.insert(ReduceOp.build(extent, carriers, types, hint, result_hints, self.loc))
        return op, op.iv, Builder(op.body, None, self.loc)

    def yield_(self, *values: Value) -> YieldOp:
        return self.insert(YieldOp(list(values), [], {}, loc=self.loc))
