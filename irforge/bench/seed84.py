"""Suite `seed84`: the 84 fp32 kernel shapes of the seed programs, at batch 1 and sequence lengths 32, 128 and 512,
with the shapes of TinyLlama-1.1B (TL) and Qwen2.5-7B (QW). TF32 stays off on every side.

| family | per (model, s) | shapes |
|---|---|---|
| matmul | q, kv, o, gate, up, down | x (1,s,K) @ w (K,N) |
| rmsnorm | 1 | x (1,s,H), weight (H) |
| softmax | 1 | (1,heads,s,s), last dim |
| silu_mul | 1 | silu(g)·u, g and u (1,s,I) |
| sdpa | 1 | causal, GQA: q (1,heads,s,d), k and v (1,kv_heads,s,d) |
| naive_attn | 1 | QKᵀ·scale + causal mask, softmax, @V; equal heads |
| matmul_add | o, down | o_proj / down_proj + residual (epilogue fusion) |
| silu_mul_matmul | 1 | (silu(g)·u) @ w_down (prologue fusion) |
"""

from __future__ import annotations

import torch

from . import ops
from .case import Case, Input
from .models import MODELS

SEQ = (32, 128, 512)
F32 = torch.float32


def _projections(m) -> dict[str, tuple[int, int]]:
    """(K, N) of each projection."""
    return {
        "q": (m.hidden, m.hidden),
        "kv": (m.hidden, m.kv_dim),
        "o": (m.hidden, m.hidden),
        "gate": (m.hidden, m.intermediate),
        "up": (m.hidden, m.intermediate),
        "down": (m.intermediate, m.hidden),
    }


def _case(op: ops.Op, cid: str, m, *inputs: tuple[str, tuple[int, ...]]) -> Case:
    specs = tuple(Input(name, shape, F32) for name, shape in inputs)
    return Case(cid, op.name, specs, op.flops(*(i.shape for i in specs)), fn=op.fn, model=m.key)


def cases() -> list[Case]:
    out = []
    for m in MODELS.values():
        hidden, inter, d = m.hidden, m.intermediate, m.head_dim
        for s in SEQ:
            tag = f"{m.key}.s{s}"
            for proj, (k, n) in _projections(m).items():
                out.append(_case(ops.MATMUL, f"matmul.{m.key}.{proj}.s{s}", m, ("x", (1, s, k)), ("w", (k, n))))
            out.append(_case(ops.rmsnorm_op(m.rms_eps), f"rmsnorm.{tag}", m, ("x", (1, s, hidden)), ("w", (hidden,))))
            out.append(_case(ops.SOFTMAX, f"softmax.{tag}", m, ("x", (1, m.heads, s, s))))
            out.append(_case(ops.SILU_MUL, f"silu_mul.{tag}", m, ("g", (1, s, inter)), ("u", (1, s, inter))))
            q, kv = (1, m.heads, s, d), (1, m.kv_heads, s, d)
            out.append(_case(ops.SDPA_CAUSAL, f"sdpa.{tag}", m, ("q", q), ("k", kv), ("v", kv)))
            out.append(_case(ops.NAIVE_ATTENTION, f"naive_attn.{tag}", m, ("q", q), ("k", q), ("v", q)))
            for proj in ("o", "down"):
                k, n = _projections(m)[proj]
                out.append(
                    _case(
                        ops.MATMUL_ADD,
                        f"matmul_add.{m.key}.{proj}.s{s}",
                        m,
                        ("x", (1, s, k)),
                        ("w", (k, n)),
                        ("r", (1, s, n)),
                    )
                )
            out.append(
                _case(
                    ops.SILU_MUL_MATMUL,
                    f"silu_mul_matmul.{tag}",
                    m,
                    ("g", (1, s, inter)),
                    ("u", (1, s, inter)),
                    ("w", (inter, hidden)),
                )
            )
    return out
