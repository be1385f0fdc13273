from __future__ import annotations

from irforge.dialects.tensor.builder import TensorBuilder, accumulator_type
from irforge.dialects.torch import AtenOp

from irforge.ir import Value
from irforge.types import boolean, i64

from .common import Decomposition, as_vector, dims_arg, keepdim_result, rtype, wrap_dim


def _accumulate(b: TensorBuilder, x: Value, kind: str, axes, out_dtype) -> Value:
    """reduce(kind) over `axes` with PyTorch's accumulator: f32 for half types, i64 for integer/bool sums."""
    if kind in ("add", "mul") and not out_dtype.is_float:
        acc = i64 if out_dtype.is_int else out_dtype
    else:
        acc = accumulator_type(out_dtype)
    return b.reduce(kind, b.cast(x, acc), axes)


def _sum_like(kind: str, mean: bool = False):
    """sum / prod / mean over dims (`dim=None` or `[]`: every dim), with keepdim and dtype."""

    def lower(op: AtenOp, b: TensorBuilder):
        x = op.arg(0, "self")
        t = rtype(op)
        whole = op.aten_name in ("aten.sum", "aten.mean", "aten.prod")  # the overloads over every element
        axes = dims_arg(None if whole else op.arg(1, "dim", None), x.type.rank)
        keepdim = False if whole else op.arg(2, "keepdim", False)
        r = _accumulate(b, x, kind, axes, t.dtype)
        if mean:
            n = 1
            for a in axes:
                n *= x.type.shape[a]
            r = b.ew("div", r, float(n))
        return b.cast(keepdim_result(b, r, axes, keepdim), t.dtype)

    return lower


def _extremum(kind: str):
    """amax / amin (dims, keepdim) and max / min over every element."""

    def lower(op: AtenOp, b: TensorBuilder):
        x = op.arg(0, "self")
        whole = op.aten_name in ("aten.max", "aten.min")
        axes = dims_arg(None if whole else op.arg(1, "dim", None), x.type.rank)
        keepdim = False if whole else op.arg(2, "keepdim", False)
        return keepdim_result(b, b.reduce(kind, x, axes), axes, keepdim)

    return lower


def _index_of(b: TensorBuilder, x: Value, best: Value, axis: int) -> Value:
    """The first index along `axis` where x equals `best` (its keepdim extremum): min over matching positions."""
    s = x.type.shape
    pos = b.iota(axis, s, i64)
    hit = b.ew("eq", x, best)
    if x.type.dtype.is_float:  # NaN is the extremum PyTorch reports: its position counts as a match
        hit = b.ew("or", hit, b.ew("ne", x, x))
    return b.reduce("min", b.select(hit, pos, s[axis]), [axis])


def _max_dim(kind: str):
    """max.dim / min.dim: (values, indices) along one dim."""

    def lower(op: AtenOp, b: TensorBuilder):
        x = as_vector(b, op.arg(0, "self"))
        axis = wrap_dim(op.arg(1, "dim"), x.type.rank)
        keepdim = op.arg(2, "keepdim", False)
        best = b.reduce(kind, x, [axis])
        idx = _index_of(b, x, b.broadcast_to(best, x.type.shape), axis)
        outs = keepdim_result(b, best, [axis], keepdim), keepdim_result(b, idx, [axis], keepdim)
        return [b.reshape(v, r.type.shape) for v, r in zip(outs, op.results)]  # a 0-d input's keepdim is 0-d

    return lower


def _arg_extremum(kind: str):
    """argmax / argmin: over one dim, or over the flattened tensor when dim is None."""

    def lower(op: AtenOp, b: TensorBuilder):
        x = op.arg(0, "self")
        dim = op.arg(1, "dim", None)
        keepdim = op.arg(2, "keepdim", False)
        t = rtype(op)
        if dim is None:
            flat = b.reshape(x, (x.type.numel,))
            idx = _index_of(b, flat, b.broadcast_to(b.reduce(kind, flat, [0]), flat.type.shape), 0)
            return b.reshape(idx, t.shape)
        x = as_vector(b, x)
        axis = wrap_dim(dim, x.type.rank)
        idx = _index_of(b, x, b.broadcast_to(b.reduce(kind, x, [axis]), x.type.shape), axis)
        return b.reshape(keepdim_result(b, idx, [axis], keepdim), t.shape)

    return lower


def _var(std: bool = False, with_mean: bool = False):
    """var / std / var_mean with `correction` (default 1, Bessel's): two passes, in f32 for half types."""

    def lower(op: AtenOp, b: TensorBuilder):
        x = op.arg(0, "self")
        t = rtype(op)
        axes = dims_arg(op.arg(1, "dim", None), x.type.rank)
        correction = op.kwarg("correction")
        correction = 1 if correction is None else correction
        keepdim = op.kwarg("keepdim", False)
        xf = b.cast(x, accumulator_type(t.dtype))
        n = 1
        for a in axes:
            n *= x.type.shape[a]
        mean = b.ew("div", b.reduce("add", xf, axes), float(n))
        d = b.ew("sub", xf, mean)
        v = b.ew("div", b.reduce("add", b.ew("mul", d, d), axes), float(max(n - correction, 0)))
        if std:
            v = b.ew("sqrt", v)
        out = b.cast(keepdim_result(b, v, axes, keepdim), t.dtype)
        if with_mean:
            return out, b.cast(keepdim_result(b, mean, axes, keepdim), rtype(op, 1).dtype)
        return out

    return lower


def _any_all(kind: str):
    def lower(op: AtenOp, b: TensorBuilder):
        x = op.arg(0, "self")
        whole = op.aten_name in ("aten.any", "aten.all")
        axes = dims_arg(None if whole else op.arg(1, "dim", None), x.type.rank)
        keepdim = False if whole else op.arg(2, "keepdim", False)
        xb = x if x.type.dtype == boolean else b.ew("ne", x, 0)
        return b.cast(keepdim_result(b, b.reduce(kind, xb, axes), axes, keepdim), rtype(op).dtype)

    return lower


def _vector_norm(op: AtenOp, b: TensorBuilder):
    """linalg_vector_norm: (sum |x|^p)^(1/p) over dims; p = 2 as sqrt of a sum of squares, 1 as a sum of |x|,
    inf / -inf as max / min of |x|, 0 as a count of non-zeros; in f32 for half types."""
    x = op.arg(0, "self")
    p = op.arg(1, "ord", 2)
    axes = dims_arg(op.arg(2, "dim", None), x.type.rank)
    keepdim = op.arg(3, "keepdim", False)
    t = rtype(op)
    a = b.ew("abs", b.cast(x, accumulator_type(t.dtype)))
    if p == float("inf") or p == float("-inf"):
        r = b.reduce("max" if p > 0 else "min", a, axes)
    elif p == 0:
        r = b.reduce("add", b.cast(b.ew("ne", a, 0), a.type.dtype), axes)
    elif p == 1:
        r = b.reduce("add", a, axes)
    elif p == 2:
        r = b.ew("sqrt", b.reduce("add", b.ew("mul", a, a), axes))
    else:
        r = b.ew("pow", b.reduce("add", b.ew("pow", a, float(p)), axes), 1.0 / p)
    return b.cast(keepdim_result(b, r, axes, keepdim), t.dtype)


class DecomposeReductions(Decomposition):
    """Reductions: sum, mean, prod, amax/amin, max/min (and indices), argmax/argmin, var/std, norms, any/all.

    Each is a `tensor.reduce` (keepdim, then an index map when the axes go) with PyTorch's accumulator made
    explicit: half types cast to f32 first and back after, integer and bool sums accumulate in i64.
    """

    name = "decompose-reductions"
    handlers = {
        "aten.sum": _sum_like("add"),
        "aten.sum.dim_IntList": _sum_like("add"),
        "aten.mean": _sum_like("add", mean=True),
        "aten.mean.dim": _sum_like("add", mean=True),
        "aten.prod": _sum_like("mul"),
        "aten.prod.dim_int": _sum_like("mul"),
        "aten.amax": _extremum("max"),
        "aten.amin": _extremum("min"),
        "aten.max": _extremum("max"),
        "aten.min": _extremum("min"),
        "aten.max.dim": _max_dim("max"),
        "aten.min.dim": _max_dim("min"),
        "aten.argmax": _arg_extremum("max"),
        "aten.argmin": _arg_extremum("min"),
        "aten.var.correction": _var(),
        "aten.std.correction": _var(std=True),
        "aten.var_mean.correction": _var(with_mean=True),
        "aten.any": _any_all("max"),
        "aten.any.dim": _any_all("max"),
        "aten.any.dims": _any_all("max"),
        "aten.all": _any_all("min"),
        "aten.all.dim": _any_all("min"),
        "aten.all.dims": _any_all("min"),
        "aten.linalg_vector_norm": _vector_norm,
    }
