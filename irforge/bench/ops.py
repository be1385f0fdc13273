"""The PyTorch functions the suites time, each with the FLOPs it needs as a function of its input shapes.

FLOPs count the contractions' multiply-adds (two each), only the ones the result needs: a causal attention counts
the query-key pairs under the mask. Elementwise and reduction arithmetic is not counted: those cases are bound by
memory, and their floor is bytes over the copy bandwidth.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Op:
    name: str
    fn: Callable
    flops: Callable[..., int] = lambda *shapes: 0  # the input shapes -> FLOPs


def _rows(shape) -> int:
    return math.prod(shape[:-1])


def attention_pairs(q_len: int, kv_len: int, causal: bool) -> int:
    """Query-key pairs one head attends: all of them, or those under a causal mask aligned to the last key (query
    i sees keys up to kv_len - q_len + i)."""
    if not causal:
        return q_len * kv_len
    assert q_len <= kv_len, "a causal mask aligned to the last key needs at least as many keys as queries"
    return q_len * (kv_len - q_len) + q_len * (q_len + 1) // 2


def attention_flops(q, k, causal: bool) -> int:
    """QKᵀ and PV: 2·d FLOPs each per pair, per query head."""
    *batch, q_len, d = q
    return 4 * math.prod(batch) * d * attention_pairs(q_len, k[-2], causal)


def matmul(x, w):
    return x @ w


def matmul_add(x, w, r):
    return x @ w + r


def linear(x, w):
    return F.linear(x, w)


def rms_norm(eps: float) -> Callable:
    def rms_norm(x, w):
        return F.rms_norm(x, (x.shape[-1],), w, eps)

    return rms_norm


def add_rms_norm(eps: float) -> Callable:
    def add_rms_norm(x, r, w):
        h = x + r
        return h, F.rms_norm(h, (h.shape[-1],), w, eps)

    return add_rms_norm


def softmax(x):
    return torch.softmax(x, -1)


def silu_mul(g, u):
    return F.silu(g) * u


def silu_mul_matmul(g, u, w):
    return (F.silu(g) * u) @ w


def add(a, b):
    return a + b


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope(q, k, cos, sin):
    """HF's `apply_rotary_pos_emb` on token-major q [T, Hq, d] and k [T, Hkv, d], tables [T, d]."""
    c, s = cos[:, None, :], sin[:, None, :]
    return q * c + _rotate_half(q) * s, k * c + _rotate_half(k) * s


def sdpa_causal(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def naive_attention(q, k, v):
    """QKᵀ·scale, the causal mask, softmax, @V, written out as the seed programs do."""
    s = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(scores.masked_fill(mask, float("-inf")), -1) @ v


MATMUL = Op("matmul", matmul, lambda x, w: 2 * _rows(x) * x[-1] * w[-1])
MATMUL_ADD = Op("matmul_add", matmul_add, lambda x, w, r: 2 * _rows(x) * x[-1] * w[-1])
LINEAR = Op("linear", linear, lambda x, w: 2 * _rows(x) * x[-1] * w[0])
SILU_MUL_MATMUL = Op("silu_mul_matmul", silu_mul_matmul, lambda g, u, w: 2 * _rows(g) * g[-1] * w[-1])
SOFTMAX = Op("softmax", softmax)
SILU_MUL = Op("silu_mul", silu_mul)
ADD = Op("add", add)
ROPE = Op("rope", rope)
SDPA_CAUSAL = Op("sdpa", sdpa_causal, lambda q, k, v: attention_flops(q, k, causal=True))
SDPA_DECODE = Op("sdpa", sdpa, lambda q, k, v: attention_flops(q, k, causal=False))
NAIVE_ATTENTION = Op("naive_attn", naive_attention, lambda q, k, v: attention_flops(q, k, causal=True))


def rmsnorm_op(eps: float) -> Op:
    return Op("rmsnorm", rms_norm(eps))


def add_rmsnorm_op(eps: float) -> Op:
    return Op("add_rmsnorm", add_rms_norm(eps))
