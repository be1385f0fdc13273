from __future__ import annotations

from irforge.dialects.tensor.builder import TensorBuilder
from irforge.dialects.torch import AtenOp

from .common import Decomposition, in_f32, rtype

# rms_norm's default epsilon: the machine epsilon of the type it computes in (f32 for half types)
_EPS = {"f64": 2.220446049250313e-16, "f32": 1.1920928955078125e-07}


def _rms_norm(op: AtenOp, b: TensorBuilder):
    x, shape = op.arg(0, "input"), op.arg(1, "normalized_shape")
    weight, eps = op.arg(2, "weight", None), op.arg(3, "eps", None)
    t = rtype(op)
    axes = list(range(x.type.rank - len(shape), x.type.rank))
    xf = in_f32(b, x)
    if eps is None:
        eps = _EPS[xf.type.dtype.name]
    ms = b.mean(b.ew("mul", xf, xf), axes)
    y = b.ew("mul", xf, b.ew("rsqrt", b.ew("add", ms, eps)))
    if weight is not None:
        y = b.ew("mul", y, b.cast(weight, y.type.dtype))
    return b.cast(y, t.dtype)


class DecomposeRmsNorm(Decomposition):
    """rms_norm: x * rsqrt(mean(x^2) + eps) * weight over the normalized (last) dims, in f32 for half types.

    eps defaults to the machine epsilon of the compute type (f32 for half types), as in PyTorch.
    """

    name = "decompose-rms-norm"
    handlers = {"aten.rms_norm": _rms_norm}
