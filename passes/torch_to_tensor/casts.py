from __future__ import annotations

from irforge.dialects.tensor.builder import TensorBuilder
from irforge.dialects.torch import AtenOp

from .common import Decomposition, rtype


def _convert(op: AtenOp, b: TensorBuilder):
    return b.cast(op.arg(0, "self"), rtype(op).dtype)


class DecomposeCasts(Decomposition):
    """Type conversions (`.to(dtype)`, `.half()`, `.float()`, ...): one `cast`, none when the type already matches.

    Floats round to nearest even, floats to integers truncate toward zero, anything to bool is `x != 0`.
    """

    name = "decompose-casts"
    handlers = {
        "aten._to_copy": _convert,
        "aten.to.dtype": _convert,
        "aten.to.dtype_layout": _convert,
        "aten._to_dtype": _convert,
        "aten.type_as": _convert,
    }
