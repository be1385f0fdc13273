"""A stage's shared memory: one slot's type, the subscript of an element in it, the buffer a kernel makes."""

from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.kernel.types import SmemType

from irforge.ir import Value

from .emit import value_hint


def slot_type(op: T.StageOp) -> SmemType:
    """One slot of the stage's shared memory: the box, rows padded, or in blocks of `columns`."""
    box, c = op.box, op.columns
    shape = (*box[:-1], box[-1] + op.attributes.get("pad", 0)) if c == box[-1] else (box[-1] // c, *box[:-1], c)
    return SmemType(op.result.type.dtype, shape, op.attributes.get("swizzle", ()))


def block_index(op: T.StageOp, index: list) -> list:
    """The shared buffer's subscript (past the ring's slot) of the element a load of the stage reads at `index`."""
    c = op.columns
    if c == op.box[-1]:
        return index
    return [index[-1] // c, *index[:-1], index[-1] % c]


def _smem_type(op: T.StageOp) -> SmemType:
    t = slot_type(op)
    return SmemType(t.dtype, (op.ring, *t.shape), t.swizzle) if op.ring > 1 else t


def _buffer(m, op: T.StageOp) -> Value:
    """The stage's shared memory, made once (a stage in a loop reuses it every trip)."""
    got = m.stage_smem.get(op)
    if got is None:
        name = f"{_value_name(op.source)}_smem"
        got = m.stage_smem[op] = m.smem(_smem_type(op), name)
    return got


def _value_name(v: Value) -> str:
    return value_hint(v) or "buffer"
