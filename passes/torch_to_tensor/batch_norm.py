from __future__ import annotations

from irforge.dialects.tensor.builder import TensorBuilder
from irforge.dialects.torch import AtenOp

from irforge.index_expr import Dim

from .common import Decomposition, in_f32, rtype


def _per_channel(b: TensorBuilder, v, shape):
    """A [C] statistic broadcast along dim 1 (the channel dim) of `shape`."""
    return b.index_map(in_f32(b, v), shape, [Dim(1)])


def _batch_norm_inference(op: AtenOp, b: TensorBuilder):
    """(x - running_mean) * rsqrt(running_var + eps) * weight + bias, per channel (dim 1), in f32 for halves."""
    x, weight, bias = op.arg(0, "input"), op.arg(1, "weight", None), op.arg(2, "bias", None)
    mean, var = op.arg(3, "running_mean"), op.arg(4, "running_var")
    eps = op.arg(6, "eps")
    xf = in_f32(b, x)
    shape = xf.type.shape
    y = b.ew("mul", b.ew("sub", xf, _per_channel(b, mean, shape)),
             b.ew("rsqrt", b.ew("add", _per_channel(b, var, shape), eps)))  # fmt: skip
    if weight is not None:
        y = b.ew("mul", y, _per_channel(b, weight, shape))
    if bias is not None:
        y = b.ew("add", y, _per_channel(b, bias, shape))
    out = b.cast(y, rtype(op).dtype)
    # the saved mean and inverse std of training mode: empty here
    return [out] + [b.constant(0, rtype(op, i).dtype, rtype(op, i).shape) for i in range(1, len(op.results))]


class DecomposeBatchNorm(Decomposition):
    """batch_norm in inference (eval) mode: normalize by the running statistics, per channel, in f32 for halves."""

    name = "decompose-batch-norm"
    handlers = {"aten._native_batch_norm_legit_no_training": _batch_norm_inference}
