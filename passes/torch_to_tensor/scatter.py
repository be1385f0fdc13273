from __future__ import annotations

from irforge.dialects.tensor.builder import TensorBuilder
from irforge.dialects.torch import AtenOp

from irforge.ir import Value

from .common import Decomposition, rtype


def _positions(b: TensorBuilder, idx: Value, n: int | None = None) -> Value:
    """An index tensor as the 1-D positions a scatter takes; with `n`, negative ones count from the end (Python
    indexing; index_copy takes none)."""
    flat = b.reshape(idx, [idx.type.numel])
    return flat if n is None else b.select(b.ew("lt", flat, 0), b.ew("add", flat, n), flat)


def _index_copy(op: AtenOp, b: TensorBuilder):
    """x.index_copy(dim, index, source): source's slices along dim written at the positions index holds."""
    x, dim, index, source = op.arg(0, "self"), op.arg(1, "dim"), op.arg(2, "index"), op.arg(3, "source")
    dim %= max(x.type.rank, 1)
    pos = _positions(b, index)
    shape = (*x.type.shape[:dim], pos.type.shape[0], *x.type.shape[dim + 1 :])
    return b.scatter(x, pos, b.reshape(b.cast(source, x.type.dtype), shape), dim)


def _index_put(op: AtenOp, b: TensorBuilder):
    """x[..., idx, ...] = values along the one dimension an index tensor picks (values broadcast to the slices)."""
    x, indices, values = op.arg(0, "self"), op.arg(1, "indices"), op.arg(2, "values")
    if op.arg(3, "accumulate", False):
        raise op.error("accumulates (index_put with accumulate=True); irforge scatters by overwriting only")
    given = [i for i, v in enumerate(indices) if v is not None]
    if len(given) != 1:
        raise op.error(f"writes through {len(given)} index tensors; irforge scatters along one dimension")
    axis = given[0]
    idx = indices[axis]
    if idx.type.dtype.name == "bool":
        raise op.error("writes through a boolean mask, whose positions depend on the data")
    xs = x.type.shape
    sliced = (*xs[:axis], *idx.type.shape, *xs[axis + 1 :])  # the shape of x[..., idx, ...]
    pos = _positions(b, idx, xs[axis])
    updates = b.broadcast_to(b.cast(values, x.type.dtype), sliced)
    updates = b.reshape(updates, (*xs[:axis], pos.type.shape[0], *xs[axis + 1 :]))
    out = b.scatter(x, pos, updates, axis)
    if out.type != rtype(op):
        raise op.error(f"gives {rtype(op)} where the scatter gives {out.type}")
    return out


class DecomposeScatter(Decomposition):
    """index_put and index_copy: one `tensor.scatter` along the indexed dimension."""

    name = "decompose-scatter"
    handlers = {"aten.index_put": _index_put, "aten.index_copy": _index_copy}
