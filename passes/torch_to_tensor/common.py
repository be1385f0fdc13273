"""What every torch-to-tensor decomposition shares: the pass skeleton, argument helpers, dtype promotion, and the
composite builders several families use (matmul, softmax).

A decomposition pass lists handlers, one per ATen op it lowers:

    class DecomposeSilu(Decomposition):
        '''silu(x) = x * sigmoid(x), computed in f32 for half types.'''
        name = "decompose-silu"
        handlers = {"aten.silu": lambda op, b: ...}   # returns the replacement value(s)

The handler gets the torch op and a `TensorBuilder` that inserts before it, every new op located at
`NameLoc("aten.silu", <the torch op's location>)`; the op's results are replaced by what it returns. An op whose
results hold no elements (a size-0 dimension) never reaches its handler: it becomes empty constants. A handler
that cannot lower an op's arguments raises `op.error(...)` with the reason (one clear message for the user).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from irforge.dialects.tensor.builder import ShapeError, TensorBuilder, accumulator_type, broadcast_shapes
from irforge.dialects.torch import AtenOp

from irforge.index_expr import Dim
from irforge.ir import Value
from irforge.location import NameLoc
from irforge.pass_manager import Pass
from irforge.rewrite import RewritePattern, Rewriter, apply_patterns
from irforge.scalar_ops import quantize
from irforge.types import ScalarType, TensorType, boolean, f32, i64

Handler = Callable[[AtenOp, TensorBuilder], "Value | Sequence[Value]"]


class Decomposition(Pass):
    """Base of the torch-to-tensor decompositions (not a pass itself: it has no name)."""

    input_level = "torch"
    output_level = "torch"  # the rest of the torch ops are still there
    handlers: ClassVar[dict[str, Handler]] = {}

    def run(self, op):
        apply_patterns(op, [_Lower(f"torch.{name}", fn) for name, fn in self.handlers.items()], fold_dead=False)


class _Lower(RewritePattern):
    def __init__(self, op_name: str, fn: Handler):
        self.op_name = op_name
        self.fn = fn

    def match_and_rewrite(self, op: AtenOp, rw: Rewriter) -> bool:
        b = TensorBuilder(before=op, loc=NameLoc(op.aten_name, op.loc))
        if all(0 in r.type.shape for r in op.results):  # nothing to compute: any constant holds no elements
            rw.replace_op(op, [b.constant(0, r.type.dtype, r.type.shape) for r in op.results])
            return True
        # The declared types are ATen's (the verifier sees to it): where the decomposition's differ, or its shapes
        # do not combine, it does not cover these arguments (ATen's corners: batch sizes of 0 against 1 in sdpa).
        try:
            out = self.fn(op, b)
        except ShapeError as e:
            raise op.error(f"has shapes the decomposition does not take: {e}") from None
        values = [out] if isinstance(out, Value) else list(out)
        for v, r in zip(values, op.results):
            if v.type != r.type:
                raise op.error(f"decomposes to {v.type} where ATen gives {r.type}: irforge does not take these shapes")
        rw.replace_op(op, values)
        return True


# ---- arguments -------------------------------------------------------------------------------------------------
def rtype(op: AtenOp, i: int = 0) -> TensorType:
    return op.results[i].type


def dims_arg(dims, rank: int) -> list[int]:
    """A dim / list of dims / None argument as sorted non-negative axes (None or [] means every axis)."""
    if dims is None:
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    if len(dims) == 0:
        return list(range(rank))
    return sorted({d % rank for d in dims}) if rank else []


def wrap_dim(dim: int, rank: int) -> int:
    """A dim argument as a non-negative axis; ATen takes 0 and -1 for a 0-d tensor too (as one of shape [1])."""
    return dim % max(rank, 1)


def as_vector(b: TensorBuilder, x: Value) -> Value:
    """A 0-d tensor as shape [1], where an op computes along a dim: ATen's view of a 0-d tensor's one element."""
    return b.reshape(x, (1,)) if x.type.rank == 0 else x


def keepdim_result(b: TensorBuilder, reduced: Value, axes: Sequence[int], keepdim: bool) -> Value:
    """A keepdim reduction's value as the op gives it: as is, or with the reduced axes dropped."""
    return reduced if keepdim else b.drop_axes(reduced, axes)


# ---- dtypes ----------------------------------------------------------------------------------------------------
_ORDER = ["bool", "u8", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64"]


def promote_pair(a: ScalarType, b: ScalarType) -> ScalarType:
    """PyTorch's type promotion of two element types."""
    if a == b:
        return a
    if {a.name, b.name} == {"f16", "bf16"}:
        return f32
    if {a.name, b.name} == {"u8", "i8"}:
        return ScalarType("i16")
    return a if _ORDER.index(a.name) > _ORDER.index(b.name) else b


def scalar_dtype(v) -> ScalarType:
    """The dtype a Python number takes in promotion: bool, i64, or the default float type f32."""
    return boolean if isinstance(v, bool) else i64 if isinstance(v, int) else f32


def promote(*operands) -> ScalarType:
    """The dtype PyTorch computes in for these operands: tensors of rank > 0 take precedence over rank-0 tensors,
    which take precedence over Python numbers, unless a weaker group is of a higher category (bool < int < float).
    (c10's `ResultTypeState`.)"""
    groups: list[ScalarType | None] = [None, None, None]
    for x in operands:
        if x is None:
            continue
        g, t = (0 if x.type.rank else 1, x.type.dtype) if isinstance(x, Value) else (2, scalar_dtype(x))
        groups[g] = t if groups[g] is None else promote_pair(groups[g], t)

    def combine(higher, lower):
        if higher is None or lower is None:
            return higher or lower
        if higher.is_float:
            return higher
        if higher == boolean or lower.is_float:
            return promote_pair(higher, lower)
        return higher

    return combine(groups[0], combine(groups[1], groups[2])) or f32


def representable(value, dtype: ScalarType) -> bool:
    """Whether Python number `value` survives conversion to `dtype` unchanged."""
    import numpy as np

    if isinstance(value, bool) or not dtype.is_float:
        return True
    # compare as Python floats: numpy would convert `value` to the array's (half) type first
    return float(quantize(np.array(float(value)), dtype)) == float(value) or value != value


def operand(b: TensorBuilder, x, dtype: ScalarType, shape) -> Value:
    """A tensor or Python number as a tensor of `dtype` broadcast to `shape`."""
    if isinstance(x, Value):
        return b.broadcast_to(b.cast(x, dtype), shape)
    return b.constant(x, dtype, shape)


# ---- composite builders ----------------------------------------------------------------------------------------
def matmul(b: TensorBuilder, x: Value, w: Value, *, w_transposed: bool = False, out_dtype=None) -> Value:
    """torch.matmul semantics as broadcast-multiply + reduce(add) over K, K last so the reduction is contiguous.

    `x` is [..., M, K] (or [K]); `w` is [..., K, N] (or [K]), or [..., N, K] when `w_transposed` (linear's
    weight). Batch dimensions broadcast. Half types multiply and accumulate in f32 and round once at the end.
    """
    out_dtype = out_dtype or x.type.dtype
    acc = accumulator_type(out_dtype)
    xs, ws = x.type.shape, w.type.shape
    x_vec, w_vec = len(xs) == 1, len(ws) == 1
    if x_vec:
        x, xs = b.reshape(x, (1, xs[0])), (1, xs[0])
    if w_vec:
        ws = (ws[0], 1) if not w_transposed else (1, ws[0])
        w = b.reshape(w, ws)
    m, k = xs[-2], xs[-1]
    n = ws[-2] if w_transposed else ws[-1]
    batch = broadcast_shapes(xs[:-2], ws[:-2])
    nb = len(batch)
    shape = (*batch, m, n, k)  # [..., M, N, K]
    xlead = nb - (len(xs) - 2)
    wlead = nb - (len(ws) - 2)
    dm, dn, dk = Dim(nb), Dim(nb + 1), Dim(nb + 2)
    bx = [0 if xs[i] == 1 else Dim(xlead + i) for i in range(len(xs) - 2)]
    bw = [0 if ws[i] == 1 else Dim(wlead + i) for i in range(len(ws) - 2)]
    xb = b.index_map(b.cast(x, acc), shape, [*bx, dm, dk])
    wb = b.index_map(b.cast(w, acc), shape, [*bw, dn, dk] if w_transposed else [*bw, dk, dn])
    prod = b.ew("mul", xb, wb)
    out = b.cast(b.drop_axes(b.reduce("add", prod, [-1]), [-1]), out_dtype)  # [..., M, N]
    final = list(out.type.shape)
    if x_vec:
        final.pop(-2)
    if w_vec:
        final.pop(-1)
    return b.reshape(out, final)


def softmax(b: TensorBuilder, x: Value, dim: int, *, log: bool = False) -> Value:
    """Numerically stable softmax (or log-softmax) over `dim`, in x's type (callers cast half types to f32)."""
    if x.type.rank == 0:
        return b.reshape(softmax(b, as_vector(b, x), 0, log=log), ())
    dim %= x.type.rank
    shifted = b.ew("sub", x, b.reduce("max", x, [dim]))
    e = b.ew("exp", shifted)
    s = b.reduce("add", e, [dim])
    if log:
        return b.ew("sub", shifted, b.ew("log", s))
    return b.ew("div", e, s)


def in_f32(b: TensorBuilder, x: Value) -> Value:
    """x in the type PyTorch computes composite ops in (f32 for half types)."""
    return b.cast(x, accumulator_type(x.type.dtype))
