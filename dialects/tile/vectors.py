"""What a vectorized loop (`vector V`) may hold to be materialized with register tiles: its innermost index feeds
only subscripts, each independent of it or contiguous in it and aligned. `tile-vectorize` vectorizes where
`why_not` finds nothing; `lower-to-kernel` refuses a vectorized loop where it finds something."""

from __future__ import annotations

from irforge import index_expr as ix
from irforge.ir import Value

from ..loop.indexing import ValueDim
from . import IndexOp, LoadOp, LoopOp, StageOp, StoreOp, linear_terms


def lane_values(loop: LoopOp) -> set[Value]:
    """Values of the loop's body that vary with its innermost index (the index itself included)."""
    lanes = {loop.ivs[-1]}
    for op in loop.walk():
        if op is not loop and any(v in lanes for v in op.operands):
            lanes.update(op.results)
    return lanes


def why_not(loop: LoopOp, width: int) -> str | None:
    """Why `loop` cannot take vector work items of `width` (None when it can)."""
    if loop.extents[-1] % width:
        return f"its innermost extent {loop.extents[-1]} is not a multiple of {width}"
    iv = loop.ivs[-1]
    lanes = lane_values(loop)
    for op in loop.walk():
        if op is loop:
            continue
        index_lanes = [v for v in op.operands if v in lanes and v.type == iv.type]
        if index_lanes and not isinstance(op, (LoadOp, StoreOp, IndexOp)):
            return f"'{op.name}' uses the index as a value, not a subscript"
        if isinstance(op, StoreOp) and op.value in lanes and not any(v in lanes for v in op.indices):
            return "a store of lane values has subscripts that do not vary with the index"
        if isinstance(op, (LoadOp, StoreOp)) and any(v in lanes for v in op.indices):
            why = _contiguous(op, iv, width)
            if why:
                return why
    return None


def _expand(e: ix.IndexExpr) -> ix.IndexExpr:
    """`e` with `tile.index` results replaced by their expressions (so the loop index shows)."""
    if isinstance(e, ValueDim):
        owner = e.value.owner
        return _expand(owner.index_expr()) if isinstance(owner, IndexOp) else e
    kids = e.children()
    return e.rebuild([_expand(k) for k in kids]) if kids else e


def _contiguous(op, iv: Value, width: int) -> str | None:
    """Why the lanes of `op`'s access are not `width` consecutive, aligned elements (None when they are)."""
    src = op.operands[0]
    shape = src.type.shape
    exprs = [_expand(e) for e in op.index_exprs()]
    staged = isinstance(src.owner, StageOp)
    if staged:  # shared memory: the lanes run along the last dimension
        if any(_uses(e, iv) for e in exprs[:-1]):
            return f"'{op.name}' of a staged box moves along a dimension other than the last"
        if shape[-1] % width:
            return f"'{op.name}' reads a staged box whose rows ({shape[-1]}) are not a multiple of {width}"
        offset = exprs[-1]
    else:
        offset = ix.Const(0)
        for e, n in zip(exprs, shape):
            offset = offset * n + e
    coeff, rest = _split(offset, iv)
    if coeff is None:
        return f"'{op.name}' has a subscript that is not linear in the index"
    if coeff != 1:
        return f"'{op.name}' strides by {coeff} elements per iteration (lanes must be consecutive)"
    if not _multiple(rest, width):
        return f"'{op.name}' starts at offsets that are not multiples of {width} (unaligned vectors)"
    return None


def _uses(e: ix.IndexExpr, v: Value) -> bool:
    if isinstance(e, ValueDim):
        return e.value is v
    return any(_uses(k, v) for k in e.children())


def _split(e: ix.IndexExpr, iv: Value) -> tuple[int | None, list]:
    """(coefficient of `iv`, the other terms) when `e` is linear in `iv` (None when it is not)."""
    coeff, rest = 0, []
    for atom, k in linear_terms(e):
        if isinstance(atom, ValueDim) and atom.value is iv:
            coeff += k
        elif _uses(atom, iv):
            return None, []
        else:
            rest.append((atom, k))
    return coeff, rest


def _multiple(terms, width: int) -> bool:
    """Whether a sum of (atom, coefficient) is always a multiple of `width` (structurally)."""
    return all(k % width == 0 for _, k in terms)
