from __future__ import annotations

from irforge.dialects.tensor.builder import TensorBuilder, broadcast_shapes
from irforge.dialects.torch import AtenOp

from irforge.index_expr import Dim

from .common import Decomposition, as_vector, rtype, wrap_dim


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
    x, dim, index = as_vector(b, op.arg(0, "self")), op.arg(1, "dim"), op.arg(2, "index")
    return b.reshape(gather_rows(b, x, index, wrap_dim(dim, x.type.rank)), rtype(op).shape)


def _gather(op: AtenOp, b: TensorBuilder):
    """torch.gather: out[i][j] = x[i][index[i][j]] along `dim`; the index tensor has the output's shape."""
    x, dim, index = as_vector(b, op.arg(0, "self")), op.arg(1, "dim"), as_vector(b, op.arg(2, "index"))
    dim = wrap_dim(dim, x.type.rank)
    shape = index.type.shape
    coords = [Dim(i) for i in range(len(shape))]
    return b.reshape(b.gather(x, index, dim, shape, coords[:dim] + coords[dim + 1 :], coords), rtype(op).shape)


def _index(op: AtenOp, b: TensorBuilder):
    """x[i0, i1, ...] advanced indexing (`aten.index.Tensor`): index tensors (None for a dimension taken whole)
    broadcast together to a shape B; one gather per index tensor, each picking along its dimension with B's
    coordinates carried first. As in NumPy, B replaces the indexed dimensions in place when they are adjacent,
    and comes first otherwise."""
    x, indices = op.arg(0, "self"), op.arg(1, "indices")
    given = [i for i, v in enumerate(indices) if v is not None]
    if any(indices[i].type.dtype.name == "bool" for i in given):
        raise op.error("indexes with a boolean mask, whose result shape depends on the data")
    bshape = broadcast_shapes(*(indices[i].type.shape for i in given))
    nb = len(bshape)
    # each axis of the value so far is ("b", j), B's coordinate j, or ("x", d), x's dimension d
    cur, layout = x, [("x", d) for d in range(x.type.rank)]
    for k, d in enumerate(given):
        idx = indices[d]
        n = x.type.shape[d]
        idx = b.select(b.ew("lt", idx, 0), b.ew("add", idx, n), idx)  # Python-style negative indices
        out = [("b", j) for j in range(nb)] + [("x", e) for e in range(x.type.rank) if e not in given[: k + 1]]
        shape = [bshape[j] if kind == "b" else x.type.shape[j] for kind, j in out]
        other = [Dim(out.index(a)) for a in layout if a != ("x", d)]
        lead = nb - idx.type.rank
        index = [0 if m == 1 else Dim(lead + i) for i, m in enumerate(idx.type.shape)]
        cur, layout = b.gather(cur, idx, layout.index(("x", d)), shape, other, index), out
    if given == list(range(given[0], given[-1] + 1)):  # adjacent: B goes where the indexed dimensions were
        before = [i for i, (kind, e) in enumerate(layout) if kind == "x" and e < given[0]]
        after = [i for i, (kind, e) in enumerate(layout) if kind == "x" and e > given[-1]]
        cur = b.permute(cur, [*before, *range(nb), *after])
    if cur.type != rtype(op):
        raise op.error(f"gives {rtype(op)} where indexing gives {cur.type}")
    return cur


class DecomposeEmbedding(Decomposition):
    """embedding, index_select, gather and advanced indexing: `tensor.gather`s (one per index tensor)."""

    name = "decompose-embedding"
    handlers = {
        "aten.embedding": _embedding,
        "aten.index_select": _index_select,
        "aten.gather": _gather,
        "aten.index.Tensor": _index,
    }
