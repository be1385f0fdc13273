"""kernel-to-cuda's C text shared by the emitter and its statement mixins: index expressions, (swizzled)
shared-memory offsets, scalar types, and the element counts of the arrays that hold tiles and fragments."""

from __future__ import annotations

from irforge.dialects.cuda.prelude import C_TYPES
from irforge.dialects.kernel.types import FragType, SmemType

from irforge import index_expr as ix
from irforge.types import ScalarType, TensorType


def c_type(t: ScalarType, index_t: str) -> str:
    return index_t if t.name == "index" else C_TYPES[t.name]


def c_index(e: ix.IndexExpr, leaf) -> str:
    """An index expression in C (operands are non-negative, so `/` and `%` agree with floordiv and mod)."""
    if isinstance(e, ix.Const):
        return str(e.value) if e.value >= 0 else f"({e.value})"
    if isinstance(e, ix.Dim):
        return leaf(e.index)
    lhs, rhs = c_index(e.lhs, leaf), c_index(e.rhs, leaf)
    if isinstance(e, ix.Min):
        return f"min({lhs}, {rhs})"
    if isinstance(e, ix.Max):
        return f"max({lhs}, {rhs})"
    if isinstance(e, ix.CeilDiv):
        return f"(({lhs} + {rhs} - 1) / {rhs})"
    if e.lhs.prec < e.prec and not isinstance(e.lhs, ix.CeilDiv):
        lhs = f"({lhs})"
    if e.rhs.prec <= e.prec and not isinstance(e.rhs, (ix.Min, ix.Max, ix.CeilDiv)):
        rhs = f"({rhs})"
    sym = {ix.Add: "+", ix.Sub: "-", ix.Mul: "*", ix.FloorDiv: "/", ix.Mod: "%"}[type(e)]
    return f"{lhs} {sym} {rhs}"


def smem_offset_text(exprs, t: SmemType, leaf, offset: int = 0, scale: int = 1) -> str:
    """C text of the (swizzled) element offset `offset` past the point `exprs` (one per dimension of `t`, or fewer:
    the leading ones) of shared buffer `t`, times `scale` (the element's bytes for an address: distributed over the
    terms, so that constant parts stay one immediate); `leaf(i)` names dimension i of the expressions."""
    lin = ix.Const(offset)
    for e, s in zip(exprs, t.strides):
        lin = lin + e * s
    if not t.swizzle:
        return c_index(ix.scaled(lin, scale), leaf)
    b, m, s = t.swizzle
    rows_of_columns = offset == 0 and len(exprs) == len(t.shape) and t.shape[-1] <= 1 << (m + s)
    if rows_of_columns and all(st % (1 << (m + s)) == 0 for st in t.strides[:-1]):
        # Rows of at most 2^(M+S) elements: the swizzle XORs a row's bits into its column, o = r + c goes to
        # r + (c ^ f(r)); the row part r stays outside (its constants immediates) and f(r) is the lane's, the same
        # for every column it reads.
        row = ix.Const(0)
        for e, st in zip(exprs[:-1], t.strides[:-1]):
            row = row + e * st
        flip = f"irf_swizzle_row<{b}, {m}, {s}>({c_index(row, leaf)})"
        moved = f"(({c_index(exprs[-1], leaf)}) ^ {flip})"
        moved = moved if scale == 1 else f"{scale} * {moved}"
        row_text = c_index(ix.scaled(row, scale), leaf)
        return moved if row_text == "0" else f"{row_text} + {moved}"
    text = f"irf_swizzle<{b}, {m}, {s}>({c_index(lin, leaf)})"
    return text if scale == 1 else f"{scale} * {text}"


def _numel(t) -> int:
    if isinstance(t, TensorType):
        return t.numel
    if isinstance(t, FragType):
        return t.per_lane
    return 1


def _is_array(t) -> bool:
    return isinstance(t, (TensorType, FragType))
