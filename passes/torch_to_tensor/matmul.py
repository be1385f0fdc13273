from __future__ import annotations

from irforge.dialects.tensor.builder import TensorBuilder, accumulator_type
from irforge.dialects.torch import AtenOp

from .common import Decomposition, in_f32, matmul, operand, rtype


def _matmul(op: AtenOp, b: TensorBuilder):
    x, w = op.arg(0, "self"), op.arg(1, "other" if op.packet == "aten.matmul" else "mat2")
    return matmul(b, x, w, out_dtype=rtype(op).dtype)


def _linear(op: AtenOp, b: TensorBuilder):
    """x @ w.T + bias, the transpose folded into the index map; the bias joins the f32 accumulator."""
    x, w, bias = op.arg(0, "input"), op.arg(1, "weight"), op.arg(2, "bias", None)
    t = rtype(op)
    acc = accumulator_type(t.dtype)
    y = matmul(b, x, w, w_transposed=True, out_dtype=acc)
    if bias is not None:
        y = b.ew("add", y, b.cast(bias, acc))
    return b.cast(y, t.dtype)


def _addmm(op: AtenOp, b: TensorBuilder):
    """beta * input + alpha * (m1 @ m2), accumulated in f32 for half types."""
    bias, m1, m2 = (
        op.arg(0, "self"),
        op.arg(1, "mat1" if op.packet == "aten.addmm" else "batch1"),
        op.arg(2, "mat2" if op.packet == "aten.addmm" else "batch2"),
    )
    beta, alpha = op.kwarg("beta", 1), op.kwarg("alpha", 1)
    t = rtype(op)
    acc = accumulator_type(t.dtype)
    y = matmul(b, m1, m2, out_dtype=acc)
    if alpha != 1:
        y = b.ew("mul", y, alpha)
    if beta != 0:
        c = operand(b, in_f32(b, bias), acc, t.shape)
        y = b.ew("add", y, c if beta == 1 else b.ew("mul", c, beta))
    return b.cast(y, t.dtype)


class DecomposeMatmul(Decomposition):
    """linear, matmul, mm, bmm, addmm, baddbmm, mv, dot: a broadcast multiply then `reduce add` over K.

    The operands are index-mapped to [..., M, N, K] (K last, transposes and batch broadcasting folded into the
    maps), multiplied, and reduced over K, so the loop level sees the contraction's algebra and can fuse and tile
    it. Half types multiply and accumulate in f32 and round once, as PyTorch's CPU kernels do.
    """

    name = "decompose-matmul"
    handlers = {
        "aten.matmul": _matmul,
        "aten.mm": _matmul,
        "aten.bmm": _matmul,
        "aten.mv": lambda op, b: matmul(b, op.arg(0, "self"), op.arg(1, "vec"), out_dtype=rtype(op).dtype),
        "aten.dot": lambda op, b: matmul(b, op.arg(0, "self"), op.arg(1, "tensor"), out_dtype=rtype(op).dtype),
        "aten.linear": _linear,
        "aten.addmm": _addmm,
        "aten.baddbmm": _addmm,
    }
