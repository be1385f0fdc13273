from __future__ import annotations

from irforge.dialects.tensor.builder import TensorBuilder, accumulator_type
from irforge.dialects.torch import AtenOp

from .common import Decomposition, promote_pair, rtype, softmax


def _softmax(log: bool):
    def lower(op: AtenOp, b: TensorBuilder):
        x, dim = op.arg(0, "self"), op.arg(1, "dim")
        t = rtype(op)
        # softmax.int's dtype and _softmax's half_to_float only change the result's type, which `t` already says
        compute = accumulator_type(promote_pair(x.type.dtype, t.dtype))
        return b.cast(softmax(b, b.cast(x, compute), dim, log=log), t.dtype)

    return lower


class DecomposeSoftmax(Decomposition):
    """softmax and log_softmax: max-subtracted exp, reduce add, divide (or subtract the log), in f32 for halves.

    exp(x - max) / sum(exp(x - max)) over `dim`; log_softmax is (x - max) - log(sum(exp(x - max))).
    """

    name = "decompose-softmax"
    handlers = {
        "aten.softmax.int": _softmax(log=False),
        "aten._softmax": _softmax(log=False),
        "aten.log_softmax.int": _softmax(log=True),
        "aten._log_softmax": _softmax(log=True),
    }
