from __future__ import annotations

import math

from irforge.dialects.tensor.builder import ShapeError, TensorBuilder, accumulator_type
from irforge.dialects.torch import AtenOp

from irforge import index_expr as ix
from irforge.index_expr import Dim
from irforge.ir import Value
from irforge.types import boolean

from .common import Decomposition, matmul, rtype, softmax


def _share_heads(b: TensorBuilder, kv: Value, heads: int) -> Value:
    """Grouped-query attention: query head h reads key/value head h // (heads / kv_heads), by index mapping."""
    s = kv.type.shape
    if s[-3] == 0 or heads % s[-3]:
        raise ShapeError(f"{heads} query heads cannot share {s[-3]} key/value heads")
    group = heads // s[-3]
    shape = (*s[:-3], heads, s[-2], s[-1])
    r = len(shape)
    exprs = [Dim(i) for i in range(r)]
    exprs[r - 3] = ix.floordiv(Dim(r - 3), group)
    return b.index_map(kv, shape, exprs)


def _sdpa(op: AtenOp, b: TensorBuilder):
    """softmax(q @ k^T * scale + mask) @ v, in f32 for half types.

    q [..., Hq, L, E], k [..., Hkv, S, E], v [..., Hkv, S, Ev]. `is_causal` keeps key s <= query l (top-left
    aligned, as PyTorch); a bool `attn_mask` keeps where true, a float one is added. `enable_gqa` shares each
    key/value head among Hq / Hkv query heads.
    """
    q, k, v = op.arg(0, "query"), op.arg(1, "key"), op.arg(2, "value")
    mask, dropout = op.arg(3, "attn_mask", None), op.arg(4, "dropout_p", 0.0)
    causal, scale, gqa = op.arg(5, "is_causal", False), op.kwarg("scale"), op.kwarg("enable_gqa", False)
    if dropout:
        raise op.error(f"has dropout_p={dropout}; irforge compiles inference, where dropout is 0")
    k_len, v_len = k.type.shape[-2:-1], v.type.shape[-2:-1]
    if k_len != v_len:  # PyTorch's meta function and CPU kernel take it (and read past the value's end)
        raise ShapeError(f"key has {list(k_len)} positions but value has {list(v_len)}")
    t = rtype(op)
    acc = accumulator_type(t.dtype)
    heads = q.type.shape[-3] if q.type.rank >= 3 else None
    if gqa and heads is not None and k.type.shape[-3] != heads:
        k, v = _share_heads(b, k, heads), _share_heads(b, v, heads)
    qf, kf, vf = b.cast(q, acc), b.cast(k, acc), b.cast(v, acc)
    if scale is None:
        scale = 1.0 / math.sqrt(q.type.shape[-1])
    scores = b.ew("mul", matmul(b, qf, kf, w_transposed=True), scale)  # [..., L, S]
    shape = scores.type.shape
    if causal:
        keep = b.ew("le", b.iota(len(shape) - 1, shape), b.iota(len(shape) - 2, shape))
        scores = b.select(keep, scores, float("-inf"))
    if mask is not None:
        if mask.type.dtype == boolean:
            scores = b.select(b.broadcast_to(mask, shape), scores, float("-inf"))
        else:
            scores = b.ew("add", scores, b.broadcast_to(b.cast(mask, acc), shape))
    probs = softmax(b, scores, -1)
    return b.cast(matmul(b, probs, vf), t.dtype)


class DecomposeAttention(Decomposition):
    """scaled_dot_product_attention: matmul, scale, causal/bool/float masks, softmax, matmul (GQA by index maps)."""

    name = "decompose-attention"
    handlers = {"aten.scaled_dot_product_attention": _sdpa}
