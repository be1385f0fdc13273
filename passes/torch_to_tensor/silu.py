from __future__ import annotations

from irforge.dialects.tensor.builder import TensorBuilder
from irforge.dialects.torch import AtenOp

from .common import Decomposition, in_f32, rtype


def _silu(op: AtenOp, b: TensorBuilder):
    xf = in_f32(b, op.arg(0, "self"))
    return b.cast(b.ew("mul", xf, b.ew("sigmoid", xf)), rtype(op).dtype)


class DecomposeSilu(Decomposition):
    """silu(x) = x * sigmoid(x), in f32 for half types."""

    name = "decompose-silu"
    handlers = {"aten.silu": _silu}
