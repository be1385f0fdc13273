from __future__ import annotations

from irforge.dialects.tensor.builder import TensorBuilder, accumulator_type
from irforge.dialects.torch import AtenOp

from irforge.index_expr import Dim

from .common import Decomposition, rtype


def _scan(kind: str, identity):
    """cumsum / cumprod along `dim`: out[..., i, ...] = fold of x[..., j, ...] over j <= i, written as a reduction
    over a new last axis j masked to the prefix (`iota` i >= `iota` j). It does n² work for a scan of length n,
    which suits the short scans models hold (position ids, masks), not long ones."""

    def lower(op: AtenOp, b: TensorBuilder):
        x, t = op.arg(0, "self"), rtype(op)
        rank = x.type.rank
        if rank == 0:
            return b.cast(x, t.dtype)
        dim = op.arg(1, "dim") % rank
        acc = accumulator_type(t.dtype)
        shape = (*x.type.shape, x.type.shape[dim])
        coords = [Dim(rank) if a == dim else Dim(a) for a in range(rank)]  # x[..., j, ...] at [..., i, ..., j]
        spread = b.index_map(b.cast(x, acc), shape, coords)
        prefix = b.ew("ge", b.iota(dim, shape), b.iota(rank, shape))
        folded = b.reduce(kind, b.select(prefix, spread, identity), [rank])
        return b.cast(b.drop_axes(folded, [rank]), t.dtype)

    return lower


class DecomposeScans(Decomposition):
    """cumsum and cumprod: a masked reduction over each prefix, in the result type (f32 for half types)."""

    name = "decompose-scans"
    handlers = {"aten.cumsum": _scan("add", 0), "aten.cumprod": _scan("mul", 1)}
