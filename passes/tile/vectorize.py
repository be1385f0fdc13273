from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.kernel.types import element_bytes
from irforge.dialects.loop.indexing import ValueDim
from irforge.passes.tile.heuristics import heuristic

from irforge import index_expr as ix
from irforge.ir import Operation, Value
from irforge.pass_manager import Choices, Pass, option


class TileVectorize(Pass):
    """Give loops vector work items: each thread takes `width` consecutive iterations at once (16-byte accesses).

    A loop (free or reduce) whose innermost index only feeds subscripts, each either independent of it or
    contiguous in it (coefficient 1 in the element offset, the rest a multiple of the width: aligned), gets
    `vector width`. Materialized, the values that depend on the index become register tiles of `width` elements
    (one 16-byte load or store each), the rest stay scalars. Loops with loops inside are left alone (lanes through
    inner loops come with register tiling). Loops already vectorized are left alone, so the pass is idempotent.
    The grid shrinks to the fewer work items.
    """

    name = "tile-vectorize"
    input_level = "tile"
    anchor = "kernel"
    width: int = option(
        0,
        domain=Choices((0, 1, 2, 4, 8, 16)),
        help="elements per work item (0: 16 bytes of the narrowest type the loop accesses, as wide as the loop "
        "allows, by passes/tile/heuristics.py; 1: no vectors)",
    )

    def check(self, op: Operation) -> str | None:
        if not isinstance(op, T.KernelOp) or self.width <= 1:
            return None
        for loop in _candidates(op):
            why = why_not(loop, self.width)
            if why:
                return f"cannot vectorize the loop over {_name(loop)} by {self.width}: {why}"
        return None

    def run(self, op: Operation) -> None:
        if self.width == 1:
            return
        why = self.check(op)
        if why:
            raise op.error(why)
        for loop in _candidates(op):
            width = self.width
            if width == 0:
                narrowest = min((element_bytes(a.operands[0].type.dtype) for a in _accesses(loop)), default=4)
                width = heuristic().vector_width(op, loop, narrowest, lambda v, lp=loop: why_not(lp, v) is None)
            if width > 1:
                loop.attributes["vector"] = width
        T.fit_grid(op)


def _name(loop: T.LoopOp) -> str:
    return "%" + (loop.ivs[-1].name_hint or "?")


def _candidates(kernel: T.KernelOp) -> list[T.LoopOp]:
    """Loops not vectorized yet with no loop inside."""
    return [
        lp
        for lp in kernel.walk()
        if isinstance(lp, T.LoopOp)
        and lp.vector == 1
        and lp.extents
        and not any(isinstance(x, T.LoopOp) for x in lp.walk() if x is not lp)
    ]


def _accesses(loop: T.LoopOp) -> list[Operation]:
    return [x for x in loop.walk() if isinstance(x, (T.LoadOp, T.StoreOp))]


def lane_values(loop: T.LoopOp) -> set[Value]:
    """Values of the loop's body that vary with its innermost index (the index itself included)."""
    lanes = {loop.ivs[-1]}
    for op in loop.walk():
        if op is not loop and any(v in lanes for v in op.operands):
            lanes.update(op.results)
    return lanes


def why_not(loop: T.LoopOp, width: int) -> str | None:
    """Why `loop` cannot take vector work items of `width` (None when it can)."""
    if loop.extents[-1] % width:
        return f"its innermost extent {loop.extents[-1]} is not a multiple of {width}"
    iv = loop.ivs[-1]
    lanes = lane_values(loop)
    for op in loop.walk():
        if op is loop:
            continue
        index_lanes = [v for v in op.operands if v in lanes and v.type == iv.type]
        if index_lanes and not isinstance(op, (T.LoadOp, T.StoreOp, T.IndexOp)):
            return f"'{op.name}' uses the index as a value, not a subscript"
        if isinstance(op, T.StoreOp) and op.value in lanes and not any(v in lanes for v in op.indices):
            return "a store of lane values has subscripts that do not vary with the index"
        if isinstance(op, (T.LoadOp, T.StoreOp)) and any(v in lanes for v in op.indices):
            why = _contiguous(op, iv, width)
            if why:
                return why
    return None


def _expand(e: ix.IndexExpr) -> ix.IndexExpr:
    """`e` with `tile.index` results replaced by their expressions (so the loop index shows)."""
    if isinstance(e, ValueDim):
        owner = e.value.owner
        return _expand(owner.index_expr()) if isinstance(owner, T.IndexOp) else e
    kids = e.children()
    return e.rebuild([_expand(k) for k in kids]) if kids else e


def _contiguous(op, iv: Value, width: int) -> str | None:
    """Why the lanes of `op`'s access are not `width` consecutive, aligned elements (None when they are)."""
    src = op.operands[0]
    shape = src.type.shape
    exprs = [_expand(e) for e in op.index_exprs()]
    staged = isinstance(src.owner, T.StageOp)
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
    for atom, k in T.linear_terms(e):
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
