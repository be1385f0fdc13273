from __future__ import annotations

import math

from irforge.dialects.tensor.builder import TensorBuilder
from irforge.dialects.torch import AtenOp

from .common import Decomposition, in_f32, rtype


def _gelu(op: AtenOp, b: TensorBuilder):
    x = in_f32(b, op.arg(0, "self"))
    approximate = op.kwarg("approximate", "none")
    if approximate == "tanh":
        inner = b.ew("mul", b.ew("add", x, b.ew("mul", b.ew("mul", b.ew("mul", x, x), x), 0.044715)),
                     math.sqrt(2.0 / math.pi))  # fmt: skip
        cdf = b.ew("add", b.ew("tanh", inner), 1.0)
    elif approximate == "none":
        cdf = b.ew("add", b.ew("erf", b.ew("mul", x, math.sqrt(0.5))), 1.0)
    else:
        raise op.error(f"has an unknown approximate='{approximate}' (PyTorch knows 'none' and 'tanh')")
    return b.cast(b.ew("mul", b.ew("mul", x, 0.5), cdf), rtype(op).dtype)


class DecomposeGelu(Decomposition):
    """gelu, exact (erf) or approximate='tanh', computed in f32 for half types.

    0.5 * x * (1 + erf(x / sqrt(2))), or 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))).
    """

    name = "decompose-gelu"
    handlers = {"aten.gelu": _gelu}
