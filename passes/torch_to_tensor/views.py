from __future__ import annotations

from irforge.dialects.tensor.builder import TensorBuilder
from irforge.dialects.torch import AtenOp

from irforge import index_expr as ix
from irforge.index_expr import Dim
from irforge.ir import Value

from .common import Decomposition, rtype, wrap_dim


def _reshape(op: AtenOp, b: TensorBuilder):
    """view, reshape, squeeze, unsqueeze, flatten, ...: row-major reshapes to the result's shape."""
    return b.reshape(op.arg(0, "self"), rtype(op).shape)


def _permute(op: AtenOp, b: TensorBuilder):
    x = op.arg(0, "self")
    return b.permute(x, [d % x.type.rank for d in op.arg(1, "dims")])


def _transpose(op: AtenOp, b: TensorBuilder):
    x = op.arg(0, "self")
    r = x.type.rank
    if r == 0:  # ATen transposes a 0-d tensor's dims 0 and -1: nothing moves
        return b.permute(x, [])
    if op.packet == "aten.t":  # 2-D transpose; identity below two dimensions
        d0, d1 = (0, 1) if r == 2 else (0, 0)
    else:
        d0, d1 = op.arg(1, "dim0") % r, op.arg(2, "dim1") % r
    perm = list(range(r))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return b.permute(x, perm)


def _expand(op: AtenOp, b: TensorBuilder):
    return b.broadcast_to(op.arg(0, "self"), rtype(op).shape)


def _clamp_index(i, n: int, default: int) -> int:
    if i is None:
        return default
    if i < 0:
        i += n
    return min(max(i, 0), n)


def slice_along(b: TensorBuilder, x: Value, dim: int, start: int, step: int, length: int) -> Value:
    """x[..., start : start + length * step : step, ...] along `dim`."""
    shape = list(x.type.shape)
    shape[dim] = length
    exprs = [Dim(i) if i != dim else Dim(i) * step + start for i in range(len(shape))]
    return b.index_map(x, shape, exprs)


def _slice(op: AtenOp, b: TensorBuilder):
    x = op.arg(0, "self")
    dim = op.arg(1, "dim", 0) % x.type.rank
    step = op.arg(4, "step", 1)
    if step <= 0:
        raise op.error(f"has step {step}; slices need a positive step")
    start = _clamp_index(op.arg(2, "start", None), x.type.shape[dim], 0)
    return slice_along(b, x, dim, start, step, rtype(op).shape[dim])


def _select(op: AtenOp, b: TensorBuilder):
    x = op.arg(0, "self")
    dim = op.arg(1, "dim") % x.type.rank
    index = op.arg(2, "index")
    n = x.type.shape[dim]
    if not -n <= index < n:
        raise op.error(f"selects index {index} of a dimension of size {n}")
    index %= n
    exprs = [Dim(i if i < dim else i - 1) for i in range(x.type.rank)]
    exprs[dim] = ix.Const(index)
    return b.index_map(x, rtype(op).shape, exprs)


def concat(b: TensorBuilder, pieces: list[Value], dim: int, shape) -> Value:
    """Concatenation along `dim`: each piece read at clamped coordinates, chosen by an iota mask."""
    pieces = [p for p in pieces if p.type.shape[dim] > 0]
    offsets, o = [], 0
    for p in pieces:
        offsets.append(o)
        o += p.type.shape[dim]
    rank = len(shape)

    def placed(p: Value, off: int) -> Value:
        n = p.type.shape[dim]
        exprs = [Dim(i) for i in range(rank)]
        exprs[dim] = ix.minimum(ix.maximum(Dim(dim) - off, 0), n - 1)
        return b.index_map(p, shape, exprs)

    out = placed(pieces[-1], offsets[-1])
    if len(pieces) == 1:
        return out
    pos = b.iota(dim, shape)
    for p, off in reversed(list(zip(pieces[:-1], offsets[:-1]))):
        out = b.select(b.ew("lt", pos, off + p.type.shape[dim]), placed(p, off), out)
    return out


def _cat(op: AtenOp, b: TensorBuilder):
    t = rtype(op)
    pieces = [b.cast(p, t.dtype) for p in op.arg(0, "tensors")]
    # legacy: 1-D empty tensors may join tensors of any rank
    pieces = [p for p in pieces if not (p.type.rank == 1 and p.type.shape[0] == 0 and t.rank != 1)]
    dim = op.arg(1, "dim", 0) % t.rank
    return concat(b, pieces, dim, t.shape)


def _split(op: AtenOp, b: TensorBuilder):
    x = op.arg(0, "self")
    dim = op.arg(2, "dim", 0) % x.type.rank
    outs, start = [], 0
    for r in op.results:
        n = r.type.shape[dim]
        outs.append(slice_along(b, x, dim, start, 1, n))
        start += n
    return outs


def _unbind(op: AtenOp, b: TensorBuilder):
    x = op.arg(0, "self")
    dim = op.arg(1, "dim", 0) % x.type.rank
    outs = []
    for k, r in enumerate(op.results):
        exprs = [Dim(i if i < dim else i - 1) for i in range(x.type.rank)]
        exprs[dim] = ix.Const(k)
        outs.append(b.index_map(x, r.type.shape, exprs))
    return outs


def _flip(op: AtenOp, b: TensorBuilder):
    x = op.arg(0, "self")
    s = x.type.shape
    dims = {wrap_dim(d, x.type.rank) for d in op.arg(1, "dims")}
    return b.index_map(x, s, [(s[i] - 1) - Dim(i) if i in dims else Dim(i) for i in range(len(s))])


def _roll(op: AtenOp, b: TensorBuilder):
    x = op.arg(0, "self")
    shifts, dims = list(op.arg(1, "shifts")), list(op.arg(2, "dims", []))
    s = x.type.shape
    if not dims:  # roll the flattened tensor
        n = x.type.numel
        flat = b.reshape(x, (n,))
        rolled = b.index_map(flat, (n,), [ix.mod(Dim(0) - shifts[0] % max(n, 1) + n, max(n, 1))])
        return b.reshape(rolled, s)
    exprs = [Dim(i) for i in range(len(s))]
    for sh, d in zip(shifts, dims):
        d %= len(s)
        exprs[d] = ix.mod(Dim(d) + (-sh) % s[d], s[d])
    return b.index_map(x, s, exprs)


def _repeat(op: AtenOp, b: TensorBuilder):
    x = op.arg(0, "self")
    t = rtype(op)
    lead = t.rank - x.type.rank
    return b.index_map(x, t.shape, [ix.mod(Dim(lead + j), n) for j, n in enumerate(x.type.shape)])


def _pad(op: AtenOp, b: TensorBuilder):
    """constant_pad_nd: (left, right) pairs from the last dimension backwards; negative pads crop."""
    x = op.arg(0, "self")
    pad = list(op.arg(1, "pad"))
    value = op.arg(2, "value", 0)
    t = rtype(op)
    s = x.type.shape
    exprs = [Dim(i) for i in range(len(s))]
    mask = None
    for k in range(len(pad) // 2):
        d = len(s) - 1 - k
        left = pad[2 * k]
        if s[d] == 0:
            continue
        exprs[d] = ix.minimum(ix.maximum(Dim(d) - left, 0), s[d] - 1)
        if left > 0 or left + s[d] < t.shape[d]:
            pos = b.iota(d, t.shape)
            inside = b.ew("and", b.ew("ge", pos, left), b.ew("lt", pos, left + s[d]))
            mask = inside if mask is None else b.ew("and", mask, inside)
    if 0 in s:
        return b.constant(value, t.dtype, t.shape)
    read = b.index_map(x, t.shape, exprs)
    return read if mask is None else b.select(mask, read, value)


def _triangle(upper: bool):
    def lower(op: AtenOp, b: TensorBuilder):
        x = op.arg(0, "self")
        k = op.arg(1, "diagonal", 0)
        s = x.type.shape
        offset = b.ew("sub", b.iota(len(s) - 1, s), b.iota(len(s) - 2, s))  # column - row
        keep = b.ew("ge" if upper else "le", offset, k)
        return b.select(keep, x, 0)

    return lower


_RESHAPES = ("view", "_unsafe_view", "reshape", "squeeze", "squeeze.dim", "squeeze.dims", "unsqueeze",
             "flatten.using_ints", "unflatten.int", "view_copy")  # fmt: skip


class DecomposeViews(Decomposition):
    """Views and layout ops: one `tensor.index_map` each, with `tensor.iota` masks where pieces join.

    view, reshape, permute, transpose, expand, squeeze, unsqueeze, slice, select, cat, split, unbind, flip, roll,
    repeat, constant_pad_nd, tril and triu.
    """

    name = "decompose-views"
    handlers = {
        **{f"aten.{n}": _reshape for n in _RESHAPES},
        "aten.permute": _permute,
        "aten.transpose.int": _transpose,
        "aten.t": _transpose,
        "aten.expand": _expand,
        "aten.expand_copy": _expand,
        "aten.slice.Tensor": _slice,
        "aten.select.int": _select,
        "aten.cat": _cat,
        "aten.split.Tensor": _split,
        "aten.split_with_sizes": _split,
        "aten.unbind.int": _unbind,
        "aten.flip": _flip,
        "aten.roll": _roll,
        "aten.repeat": _repeat,
        "aten.constant_pad_nd": _pad,
        "aten.tril": _triangle(upper=False),
        "aten.triu": _triangle(upper=True),
    }
