from __future__ import annotations

from irforge.dialects.tensor import GatherOp, IndexMapOp
from irforge.dialects.tensor.builder import is_identity

from irforge import index_expr as ix
from irforge.index_expr import AffineMap, Dim
from irforge.pass_manager import Pass
from irforge.rewrite import RewritePattern, apply_patterns


def _simplified(m: AffineMap, shape) -> AffineMap:
    return ix.simplify_map(m, shape)


class _Chain(RewritePattern):
    """index_map(index_map(x, inner), outer) -> index_map(x, inner . outer); identity maps vanish."""

    op_name = "tensor.index_map"

    def match_and_rewrite(self, op, rw):
        shape = op.result.type.shape
        src = op.input
        m = op.attributes["map"]
        producer = src.op if hasattr(src, "op") else None
        if isinstance(producer, IndexMapOp):
            composed = _simplified(producer.attributes["map"].compose(m), shape)
            rw.replace_op(op, IndexMapOp([producer.input], [op.result.type], {"map": composed}, loc=op.loc))
            return True
        if src.type == op.result.type and is_identity(m, shape):
            rw.replace_op(op, [src])
            return True
        simpler = _simplified(m, shape)
        if simpler != m:
            op.attributes["map"] = simpler
            rw.modified(op)
            return True
        return False


class _IntoGather(RewritePattern):
    """A gather reads through index maps feeding its indices (always) or its input (when the looked-up axis
    passes through the map unchanged)."""

    op_name = "tensor.gather"

    def match_and_rewrite(self, op, rw):
        a = op.attributes
        shape = op.result.type.shape
        idx_src = getattr(op.indices, "op", None)
        if isinstance(idx_src, IndexMapOp):
            attrs = {**a, "index_map": _simplified(idx_src.attributes["map"].compose(a["index_map"]), shape)}
            rw.replace_op(op, GatherOp([op.input, idx_src.input], [op.result.type], attrs, loc=op.loc))
            return True
        in_src = getattr(op.input, "op", None)
        if isinstance(in_src, IndexMapOp):
            inner = in_src.attributes["map"]  # coordinates of op.input -> of in_src.input
            axis = a["axis"]
            uses = [i for i, e in enumerate(inner.results) if Dim(axis) in _leaves(e)]
            if len(uses) != 1 or inner.results[uses[0]] != Dim(axis):
                return False
            # the gather's coordinates of op.input, with the looked-up one standing in as a placeholder dim
            outer = list(a["map"].results)
            outer.insert(axis, Dim(len(shape)))  # placeholder: one past the result's dims
            placeholder_map = AffineMap(len(shape) + 1, tuple(outer))
            through = inner.compose(placeholder_map).results
            new_axis = uses[0]
            rest = [e for i, e in enumerate(through) if i != new_axis]
            if any(len(shape) in e.dims() for e in rest):
                return False
            attrs = {**a, "axis": new_axis, "map": _simplified(AffineMap(len(shape), tuple(rest)), shape)}
            rw.replace_op(op, GatherOp([in_src.input, op.indices], [op.result.type], attrs, loc=op.loc))
            return True
        return False


def _leaves(e):
    kids = e.children()
    if not kids:
        return {e}
    return set().union(*(_leaves(k) for k in kids))


class ComposeIndexMaps(Pass):
    """Fold chains of tensor.index_map into one, absorb them into gathers, drop identities, simplify the maps.

    Index expressions are simplified against the result's extents (`index_expr.simplify`), so a reshape followed
    by its inverse becomes the identity and disappears.
    """

    name = "tensor-compose-index-maps"
    input_level = "tensor"

    def run(self, op):
        apply_patterns(op, [_Chain(), _IntoGather()])
