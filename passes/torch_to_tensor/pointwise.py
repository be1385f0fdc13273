from __future__ import annotations

from irforge.dialects.tensor.builder import TensorBuilder
from irforge.dialects.torch import AtenOp

from irforge.ir import Value
from irforge.types import boolean, f32

from .common import Decomposition, operand, promote, representable, rtype


def _compute_type(op: AtenOp, dtype, values):
    """`dtype`, or f32 when it is a half type that cannot hold an operand exactly (PyTorch computes pointwise ops
    on half types in f32: an f32 rank-0 tensor or a Python float like 0.1 enters the math unrounded)."""
    if dtype.name not in ("f16", "bf16"):
        return dtype
    for v in values:
        if isinstance(v, Value) and v.type.dtype != dtype and v.type.dtype.is_float:
            return f32
        if not isinstance(v, Value) and v is not None and not representable(v, dtype):
            return f32
    return dtype


def _apply(b: TensorBuilder, op: AtenOp, name: str, values, dtype=None):
    """Scalar op `name` on tensors/numbers, all converted to the op's result type (or `dtype`), broadcast."""
    t = rtype(op)
    want = dtype or t.dtype
    compute = _compute_type(op, want, values)
    shape = t.shape
    out = b.ew(name, *(operand(b, v, compute, shape) for v in values))
    return out if out.type.dtype == t.dtype else b.cast(out, t.dtype)


def binary(name: str):
    """`x op y` for Tensor/Scalar overloads, in the promoted type the result has."""

    def lower(op: AtenOp, b: TensorBuilder):
        x, y = op.arg(0, "self"), op.arg(1, "other")
        return _apply(b, op, name, [x, y])

    return lower


def _alpha(op: AtenOp, b: TensorBuilder, name: str, reverse: bool = False):
    x, y = op.arg(0, "self"), op.arg(1, "other")
    alpha = op.arg(2, "alpha", 1)
    if reverse:
        x, y = y, x
    if alpha != 1:
        t = rtype(op)
        compute = _compute_type(op, t.dtype, [x, y, alpha])
        xs, ys = operand(b, x, compute, t.shape), operand(b, y, compute, t.shape)
        return b.cast(b.ew(name, xs, b.ew("mul", ys, alpha)), t.dtype)
    return _apply(b, op, name, [x, y])


def compare(name: str):
    def lower(op: AtenOp, b: TensorBuilder):
        x, y = op.arg(0, "self"), op.arg(1, "other")
        return _apply(b, op, name, [x, y], dtype=promote(x, y))

    return lower


def unary(name: str):
    """A float-valued scalar op; integer inputs convert to the result's float type first (torch.exp(int) is f32)."""

    def lower(op: AtenOp, b: TensorBuilder):
        return _apply(b, op, name, [op.arg(0, "self")])

    return lower


def _same_type(name: str):
    """Ops that keep the input's type (abs, neg, sign, floor, ...): identity on integers where rounding is moot."""

    def lower(op: AtenOp, b: TensorBuilder):
        x = op.arg(0, "self")
        if name in ("floor", "ceil", "round", "trunc") and not x.type.dtype.is_float:
            return x
        return b.ew(name, x)

    return lower


def _div(op: AtenOp, b: TensorBuilder):
    x, y = op.arg(0, "self"), op.arg(1, "other")
    mode = op.arg(2, "rounding_mode", None)
    t = rtype(op)
    if mode is None or not t.dtype.is_float:
        name = {None: "div", "trunc": "div", "floor": "floordiv"}.get(mode)
        if name is None:
            raise op.error(f"has an unknown rounding_mode '{mode}'")
        return _apply(b, op, name, [x, y])
    compute = _compute_type(op, t.dtype, [x, y])
    q = b.ew("div", operand(b, x, compute, t.shape), operand(b, y, compute, t.shape))
    return b.cast(b.ew("trunc" if mode == "trunc" else "floor", q), t.dtype)


def _where(op: AtenOp, b: TensorBuilder):
    c, x, y = op.arg(0, "condition"), op.arg(1, "self"), op.arg(2, "other")
    t = rtype(op)
    return b.select(operand(b, c, boolean, t.shape), operand(b, x, t.dtype, t.shape), operand(b, y, t.dtype, t.shape))


def _clamp(op: AtenOp, b: TensorBuilder):
    x = op.arg(0, "self")
    lo, hi = op.arg(1, "min", None), op.arg(2, "max", None)
    t = rtype(op)
    compute = _compute_type(op, t.dtype, [x, lo, hi])
    y = operand(b, x, compute, t.shape)
    if lo is not None:
        y = b.ew("maximum", y, operand(b, lo, compute, t.shape))
    if hi is not None:
        y = b.ew("minimum", y, operand(b, hi, compute, t.shape))
    return b.cast(y, t.dtype)


def _clamp_one(side: str):
    def lower(op: AtenOp, b: TensorBuilder):
        return _apply(b, op, "maximum" if side == "min" else "minimum", [op.arg(0, "self"), op.arg(1, side)])

    return lower


def _relu(op: AtenOp, b: TensorBuilder):
    x = op.arg(0, "self")
    return b.ew("maximum", x, 0)


def _logical(name: str):
    def lower(op: AtenOp, b: TensorBuilder):
        x, y = op.arg(0, "self"), op.arg(1, "other")
        t = rtype(op)
        out = b.ew(name, operand(b, x, boolean, t.shape), operand(b, y, boolean, t.shape))
        return b.cast(out, t.dtype)

    return lower


def _logical_not(op: AtenOp, b: TensorBuilder):
    x = op.arg(0, "self")
    out = b.ew("not", x) if x.type.dtype == boolean else b.ew("eq", x, 0)
    return b.cast(out, rtype(op).dtype)


def _isnan(op: AtenOp, b: TensorBuilder):
    x = op.arg(0, "self")
    return b.ew("ne", x, x)


def _isinf(op: AtenOp, b: TensorBuilder):
    x = op.arg(0, "self")
    if not x.type.dtype.is_float:
        return b.constant(False, boolean, x.type.shape)
    return b.ew("eq", b.ew("abs", x), float("inf"))


def _hardtanh(op: AtenOp, b: TensorBuilder):
    x = op.arg(0, "self")
    lo, hi = op.arg(1, "min_val", -1.0), op.arg(2, "max_val", 1.0)
    return b.ew("minimum", b.ew("maximum", x, lo), hi)


def _leaky_relu(op: AtenOp, b: TensorBuilder):
    x = op.arg(0, "self")
    slope = op.arg(1, "negative_slope", 0.01)
    return b.select(b.ew("gt", x, 0), x, b.ew("mul", x, slope))


def _elu(op: AtenOp, b: TensorBuilder):
    """scale * (x if x > 0 else alpha * expm1(x * input_scale)), in f32 for half types."""
    x = op.arg(0, "self")
    alpha, scale, input_scale = op.arg(1, "alpha", 1.0), op.arg(2, "scale", 1.0), op.arg(3, "input_scale", 1.0)
    t = rtype(op)
    xf = b.cast(x, f32 if t.dtype.name in ("f16", "bf16") else t.dtype)
    neg = b.ew("mul", b.ew("expm1", b.ew("mul", xf, input_scale)), alpha)
    return b.cast(b.ew("mul", b.select(b.ew("gt", xf, 0), xf, neg), scale), t.dtype)


def _identity(op: AtenOp, b: TensorBuilder):
    return op.arg(0, "self")


_UNARY_MATH = ["exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan",
               "tanh", "sigmoid", "erf"]  # fmt: skip


class DecomposePointwise(Decomposition):
    """Arithmetic, math, comparison and logic ATen ops: elementwise ops in the result's type, broadcast explicitly.

    Operands take PyTorch's promoted type; on half types an operand the type cannot hold (an f32 rank-0 tensor, a
    Python float like 0.1) makes the op compute in f32 and round once, as PyTorch does.
    """

    name = "decompose-pointwise"
    handlers = {
        **{f"aten.{n}": unary(n) for n in _UNARY_MATH},
        **{f"aten.{n}": _same_type(n) for n in ("neg", "abs", "sign", "floor", "ceil", "round", "trunc")},
        "aten.sgn": _same_type("sign"),
        "aten.add.Tensor": lambda op, b: _alpha(op, b, "add"),
        "aten.add.Scalar": lambda op, b: _alpha(op, b, "add"),
        "aten.sub.Tensor": lambda op, b: _alpha(op, b, "sub"),
        "aten.sub.Scalar": lambda op, b: _alpha(op, b, "sub"),
        "aten.rsub.Scalar": lambda op, b: _alpha(op, b, "sub", reverse=True),
        "aten.rsub.Tensor": lambda op, b: _alpha(op, b, "sub", reverse=True),
        "aten.mul.Tensor": binary("mul"),
        "aten.mul.Scalar": binary("mul"),
        "aten.div.Tensor": _div,
        "aten.div.Scalar": _div,
        "aten.div.Tensor_mode": _div,
        "aten.div.Scalar_mode": _div,
        "aten.floor_divide": lambda op, b: _apply(b, op, "floordiv", [op.arg(0, "self"), op.arg(1, "other")]),
        "aten.remainder.Tensor": binary("remainder"),
        "aten.remainder.Scalar": binary("remainder"),
        "aten.maximum": binary("maximum"),
        "aten.minimum": binary("minimum"),
        **{f"aten.{n}.{k}": compare(n) for n in ("eq", "ne", "lt", "le", "gt", "ge") for k in ("Tensor", "Scalar")},
        "aten.where.self": _where,
        "aten.where.ScalarSelf": _where,
        "aten.where.ScalarOther": _where,
        "aten.where.Scalar": _where,
        "aten.clamp": _clamp,
        "aten.clamp.Tensor": _clamp,
        "aten.clamp_min": _clamp_one("min"),
        "aten.clamp_max": _clamp_one("max"),
        "aten.relu": _relu,
        "aten.hardtanh": _hardtanh,
        "aten.leaky_relu": _leaky_relu,
        "aten.elu": _elu,
        "aten.fmod.Tensor": binary("fmod"),
        "aten.fmod.Scalar": binary("fmod"),
        "aten.logical_and": _logical("and"),
        "aten.logical_or": _logical("or"),
        "aten.logical_xor": _logical("xor"),
        "aten.logical_not": _logical_not,
        "aten.bitwise_and.Tensor": binary("and"),
        "aten.bitwise_or.Tensor": binary("or"),
        "aten.bitwise_xor.Tensor": binary("xor"),
        "aten.bitwise_not": lambda op, b: b.ew("not", op.arg(0, "self")),
        "aten.isnan": _isnan,
        "aten.isinf": _isinf,
        "aten.clone": _identity,
        "aten.alias": _identity,
        "aten.detach": _identity,
        "aten.lift_fresh_copy": _identity,
        "aten.contiguous": _identity,
    }
