from __future__ import annotations

from irforge.dialects.tensor.builder import TensorBuilder
from irforge.dialects.torch import AtenOp

from irforge.types import f64, i64

from .common import Decomposition, rtype


def _full(value_index: int, value_name: str = "fill_value"):
    """Tensors of one value: `full`, `full_like`, `new_full`, `fill` (the value at argument `value_index`)."""

    def lower(op: AtenOp, b: TensorBuilder):
        t = rtype(op)
        return b.constant(op.arg(value_index, value_name), t.dtype, t.shape)

    return lower


def _splat(value):
    def lower(op: AtenOp, b: TensorBuilder):
        t = rtype(op)
        return b.constant(value, t.dtype, t.shape)

    return lower


def _arange(op: AtenOp, b: TensorBuilder):
    """`start + i * step`, computed in i64 for integer results and in f64 for float ones (as PyTorch does)."""
    t = rtype(op)
    if op.aten_name == "aten.arange":
        start, step = 0, 1
    else:
        start, step = op.arg(0, "start"), op.arg(2, "step", 1)
    n = t.shape[0]
    acc = t.dtype if not t.dtype.is_float else f64
    i = b.iota(0, (n,), i64)
    v = b.cast(i, acc)
    if step != 1:
        v = b.ew("mul", v, step)
    if start != 0:
        v = b.ew("add", v, start)
    return b.cast(v, t.dtype)


def _random(op: AtenOp, b: TensorBuilder):
    raise op.error(
        "draws random numbers, which irforge does not compile (create random tensors outside the program and "
        "pass them in)"
    )


_RANDOM = ("rand", "randn", "randint", "randint.low", "rand_like", "randn_like", "bernoulli", "bernoulli.p",
           "native_dropout", "normal_functional", "uniform", "randperm")  # fmt: skip


class DecomposeFactories(Decomposition):
    """Tensors made inside the program: `full`/`zeros`/`ones`(`_like`) become constants, `arange` an iota.

    `empty` tensors become zeros (their contents are unspecified). Random factories are refused with a message.
    """

    name = "decompose-factories"
    handlers = {
        "aten.full": _full(1),
        "aten.full_like": _full(1),
        "aten.new_full": _full(2),
        "aten.fill.Scalar": _full(1, "value"),
        "aten.scalar_tensor": _full(0, "s"),
        **{f"aten.{n}": _splat(0) for n in ("zeros", "zeros_like", "new_zeros", "empty_like", "new_empty")},
        "aten.empty.memory_format": _splat(0),
        "aten.empty_strided": _splat(0),
        **{f"aten.{n}": _splat(1) for n in ("ones", "ones_like", "new_ones")},
        "aten.arange": _arange,
        "aten.arange.start": _arange,
        "aten.arange.start_step": _arange,
        **{f"aten.{n}": _random for n in _RANDOM},
    }
