from __future__ import annotations

from irforge.dialects.tensor.builder import TensorBuilder, accumulator_type
from irforge.dialects.torch import AtenOp

from irforge.ir import Value
from irforge.types import f64

from .common import Decomposition, operand, rtype


def _int_power(b: TensorBuilder, x: Value, n: int) -> Value:
    """x ** n for an integer n >= 1 by repeated squaring."""
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else b.ew("mul", result, base)
        n >>= 1
        if n:
            base = b.ew("mul", base, base)
    return result


def _pow_tensor_scalar(op: AtenOp, b: TensorBuilder):
    """x ** c as PyTorch's kernel computes it: squares and cubes by multiplying, +-0.5 and -1 by sqrt, rsqrt and
    reciprocal, other exponents with `pow`; half types in f32."""
    x, e = op.arg(0, "self"), op.arg(1, "exponent")
    t = rtype(op)
    if not t.dtype.is_float:
        if not isinstance(e, int) or e < 0:
            raise op.error(f"raises integers to the power {e}; PyTorch allows only non-negative integer powers")
        return b.constant(1, t.dtype, t.shape) if e == 0 else _int_power(b, b.cast(x, t.dtype), e)
    xf = b.cast(x, accumulator_type(t.dtype))
    special = {0.5: "sqrt", -0.5: "rsqrt", -1: "reciprocal"}
    if e == 0:
        y = b.constant(1.0, xf.type.dtype, t.shape)
    elif e in special:
        y = b.ew(special[e], xf)
    elif float(e).is_integer() and 1 <= e <= 3:
        y = _int_power(b, xf, int(e))
    elif e == -2:
        y = b.ew("reciprocal", b.ew("mul", xf, xf))
    else:
        y = b.ew("pow", xf, float(e))
    return b.cast(y, t.dtype)


def _pow_general(op: AtenOp, b: TensorBuilder):
    """Tensor ** Tensor and number ** Tensor: `pow` in the result type (f32 for halves, f64 for integers)."""
    x = op.arg(0, "self")
    y = op.arg(1, "exponent")
    t = rtype(op)
    compute = accumulator_type(t.dtype) if t.dtype.is_float else f64
    return b.cast(b.ew("pow", operand(b, x, compute, t.shape), operand(b, y, compute, t.shape)), t.dtype)


class DecomposePow(Decomposition):
    """pow: small integer and half-integer exponents as multiplies, sqrt, rsqrt, reciprocal; others as `pow`."""

    name = "decompose-pow"
    handlers = {
        "aten.pow.Tensor_Scalar": _pow_tensor_scalar,
        "aten.pow.Tensor_Tensor": _pow_general,
        "aten.pow.Scalar": _pow_general,
    }
