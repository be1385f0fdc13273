from __future__ import annotations

from irforge.dialects.tensor.builder import TensorBuilder
from irforge.dialects.torch import AtenOp

from irforge.index_expr import Dim

from .common import Decomposition, rtype


def gather_rows(b: TensorBuilder, table, indices, axis: int):
    """table's slices along `axis` picked by `indices`: result shape table[:axis] + indices + table[axis+1:]."""
    ts, xs = table.type.shape, indices.type.shape
    shape = (*ts[:axis], *xs, *ts[axis + 1 :])
    k = len(xs)
    before = [Dim(i) for i in range(axis)]
    after = [Dim(axis + k + i) for i in range(len(ts) - axis - 1)]
    index = [Dim(axis + i) for i in range(k)]
    return b.gather(table, indices, axis, shape, before + after, index)


def _embedding(op: AtenOp, b: TensorBuilder):
    weight, indices = op.arg(0, "weight"), op.arg(1, "indices")
    return gather_rows(b, weight, indices, 0)


def _index_select(op: AtenOp, b: TensorBuilder):
    x, dim, index = op.arg(0, "self"), op.arg(1, "dim"), op.arg(2, "index")
    return gather_rows(b, x, index, dim % x.type.rank)


def _gather(op: AtenOp, b: TensorBuilder):
    """torch.gather: out[i][j] = x[i][index[i][j]] along `dim`; the index tensor has the output's shape."""
    x, dim, index = op.arg(0, "self"), op.arg(1, "dim"), op.arg(2, "index")
    dim %= x.type.rank
    shape = index.type.shape
    coords = [Dim(i) for i in range(len(shape))]
    return b.gather(x, index, dim, shape, coords[:dim] + coords[dim + 1 :], coords)


def _index(op: AtenOp, b: TensorBuilder):
    """x[..., idx] advanced indexing with one index tensor (and full slices before it)."""
    x, indices = op.arg(0, "self"), op.arg(1, "indices")
    given = [i for i, v in enumerate(indices) if v is not None]
    if len(given) != 1:
        raise op.error(
            f"indexes with {len(given)} index tensors; irforge supports one (x[idx], x[:, idx], embedding-style)"
        )
    axis = given[0]
    idx = indices[axis]
    if idx.type.dtype.name == "bool":
        raise op.error("indexes with a boolean mask, whose result shape depends on the data")
    n = x.type.shape[axis]
    idx = b.select(b.ew("lt", idx, 0), b.ew("add", idx, n), idx)  # Python-style negative indices
    out = gather_rows(b, x, idx, axis)
    if out.type != rtype(op):
        raise op.error(f"gives {rtype(op)} where a single-index gather gives {out.type}")
    return out


class DecomposeEmbedding(Decomposition):
    """embedding, index_select, gather and single-tensor indexing: one `tensor.gather` each."""

    name = "decompose-embedding"
    handlers = {
        "aten.embedding": _embedding,
        "aten.index_select": _index_select,
        "aten.gather": _gather,
        "aten.index.Tensor": _index,
    }
