from __future__ import annotations

from irforge.dialects.tensor.builder import TensorBuilder
from irforge.dialects.torch import AtenOp

from .common import Decomposition, in_f32, rtype


def _layer_norm(op: AtenOp, b: TensorBuilder):
    x, shape = op.arg(0, "input"), op.arg(1, "normalized_shape")
    weight, bias, eps = op.arg(2, "weight", None), op.arg(3, "bias", None), op.arg(4, "eps", 1e-5)
    t = rtype(op)
    axes = list(range(x.type.rank - len(shape), x.type.rank))
    xf = in_f32(b, x)
    centered = b.ew("sub", xf, b.mean(xf, axes))
    var = b.mean(b.ew("mul", centered, centered), axes)
    y = b.ew("mul", centered, b.ew("rsqrt", b.ew("add", var, eps)))
    if weight is not None:
        y = b.ew("mul", y, b.cast(weight, y.type.dtype))
    if bias is not None:
        y = b.ew("add", y, b.cast(bias, y.type.dtype))
    return b.cast(y, t.dtype)


class DecomposeLayerNorm(Decomposition):
    """layer_norm: (x - mean) * rsqrt(var + eps) * weight + bias over the normalized (last) dims.

    The variance is biased (divides by n) and everything is computed in f32 for half types, as in PyTorch.
    """

    name = "decompose-layer-norm"
    handlers = {"aten.layer_norm": _layer_norm}
