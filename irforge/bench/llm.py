"""Suite `llm`: bf16 LLM inference, prefill at batch 1 and decode, with the shapes of TinyLlama-1.1B (TL) and
Qwen2.5-7B (QW). Each table below is the suite; ids follow the benchmark notes (there is no R5 and no S3).

Linear weights are laid out as `nn.Linear` keeps them ([out, in]); decode rows read a KV cache of the stated
length, passed in as the cache tensors; the whole-layer rows D1-D4 run HF's own decoder layer (random weights)
and need transformers.

The linears L1-L14 also run in fp16, as twins `L1.f16` ... `L14.f16` of the same shapes: tensor cores take either
half type and the linears' goals hold for both. The other families stay bf16.
"""

from __future__ import annotations

import torch

from . import ops
from .case import Case, Input
from .models import LLM, MODELS, decoder_layer, rope_tables

BF16, F16 = torch.bfloat16, torch.float16
LINEAR_TYPES = ((BF16, ""), (F16, ".f16"))  # the linears' types and the suffix of their ids in each
TL, QW = MODELS["TL"], MODELS["QW"]
R7_EPS = 1e-6  # R7 belongs to no model

# id: (model, x shape); the weight is [hidden]
RMSNORM = {
    "R1": (TL, (1, 2048)),
    "R2": (TL, (32, 2048)),
    "R3": (TL, (512, 2048)),
    "R4": (TL, (2048, 2048)),
    "R6": (QW, (2048, 3584)),
    "R7": (None, (4096, 4096)),
}
ADD_RMSNORM = {"R8": (QW, (512, 3584))}
ROPE = {"P1": (TL, 512), "P2": (QW, 2048), "P3": (QW, 32)}  # id: (model, tokens)
SOFTMAX = {"S1": (TL, (16384, 512)), "S2": (QW, (57344, 2048)), "S4": (QW, (32, 152064))}
SILU_MUL = {"G1": (TL, (512, 5632)), "G2": (TL, (2048, 5632)), "G3": (QW, (2048, 18944)), "G4": (QW, (32, 18944))}
ADD = {"A1": (TL, (2048, 2048))}
# id: (model, projection, tokens)
LINEAR = {
    "L1": (TL, "qkv", 512),
    "L2": (TL, "gate_up", 2048),
    "L3": (TL, "down", 2048),
    "L4": (TL, "o", 128),
    "L5": (TL, "qkv", 1),
    "L6": (TL, "lm_head", 1),
    "L7": (QW, "qkv", 2048),
    "L8": (QW, "o", 512),
    "L9": (QW, "gate_up", 2048),
    "L10": (QW, "down", 2048),
    "L11": (QW, "gate_up", 1),
    "L12": (QW, "down", 32),
    "L13": (QW, "lm_head", 1),
    "L14": (QW, "lm_head", 32),
}
PREFILL_ATTENTION = {"F1": (TL, 512), "F2": (TL, 2048), "F3": (QW, 2048)}  # id: (model, tokens)
DECODE_ATTENTION = {"F4": (TL, 32, 2048), "F5": (QW, 1, 2048), "F6": (QW, 32, 2048)}  # id: (model, batch, cache)
DECODE_LAYER = {"D1": (TL, 512), "D2": (QW, 512)}  # id: (model, cache length); one token
PREFILL_LAYER = {"D3": (TL, 512), "D4": (QW, 2048)}  # id: (model, tokens)


def projection(m: LLM, name: str) -> tuple[int, int]:
    """(in, out) features of a fused projection."""
    return {
        "qkv": (m.hidden, m.q_dim + 2 * m.kv_dim),
        "o": (m.q_dim, m.hidden),
        "gate_up": (m.hidden, 2 * m.intermediate),
        "down": (m.intermediate, m.hidden),
        "lm_head": (m.hidden, m.vocab),
    }[name]


def layer_flops(m: LLM, tokens: int, kv_len: int) -> int:
    """One decoder layer on `tokens` new tokens attending `kv_len` keys (the cache and themselves, causally)."""
    weights = sum(k * n for k, n in (projection(m, p) for p in ("qkv", "o", "gate_up", "down")))
    return 2 * tokens * weights + 4 * m.heads * m.head_dim * ops.attention_pairs(tokens, kv_len, causal=True)


def _rope_input(name: str, m: LLM, positions: torch.Tensor, which: int) -> Input:
    def fill(gen, device):
        return rope_tables(m, positions.to(device), BF16)[which]

    return Input(name, (*positions.shape, m.head_dim), BF16, fill)


def _op_case(op: ops.Op, cid: str, m: LLM | None, *inputs: Input, **kw) -> Case:
    return Case(cid, op.name, inputs, op.flops(*(i.shape for i in inputs)), fn=op.fn, model=m.key if m else "", **kw)


def _x(name, shape, dtype=BF16) -> Input:
    return Input(name, shape, dtype)


def cases() -> list[Case]:
    out = []
    for cid, (m, shape) in RMSNORM.items():
        eps = m.rms_eps if m else R7_EPS
        out.append(_op_case(ops.rmsnorm_op(eps), cid, m, _x("x", shape), _x("w", shape[-1:])))
    for cid, (m, shape) in ADD_RMSNORM.items():
        out.append(_op_case(ops.add_rmsnorm_op(m.rms_eps), cid, m, _x("x", shape), _x("r", shape), _x("w", shape[-1:])))
    for cid, (m, tokens) in ROPE.items():
        pos = torch.arange(tokens)
        q, k = _x("q", (tokens, m.heads, m.head_dim)), _x("k", (tokens, m.kv_heads, m.head_dim))
        out.append(_op_case(ops.ROPE, cid, m, q, k, _rope_input("cos", m, pos, 0), _rope_input("sin", m, pos, 1)))
    for cid, (m, shape) in SOFTMAX.items():
        out.append(_op_case(ops.SOFTMAX, cid, m, _x("x", shape)))
    for cid, (m, shape) in SILU_MUL.items():
        out.append(_op_case(ops.SILU_MUL, cid, m, _x("g", shape), _x("u", shape)))
    for cid, (m, shape) in ADD.items():
        out.append(_op_case(ops.ADD, cid, m, _x("a", shape), _x("b", shape)))
    for dtype, suffix in LINEAR_TYPES:
        for cid, (m, proj, tokens) in LINEAR.items():
            k, n = projection(m, proj)
            x, w = _x("x", (tokens, k), dtype), _x("w", (n, k), dtype)
            out.append(_op_case(ops.LINEAR, cid + suffix, m, x, w, note=proj))
    for cid, (m, tokens) in PREFILL_ATTENTION.items():
        q, kv = (1, m.heads, tokens, m.head_dim), (1, m.kv_heads, tokens, m.head_dim)
        out.append(_op_case(ops.SDPA_CAUSAL, cid, m, _x("q", q), _x("k", kv), _x("v", kv), note="prefill"))
    for cid, (m, batch, cache) in DECODE_ATTENTION.items():
        q, kv = (batch, m.heads, 1, m.head_dim), (batch, m.kv_heads, cache, m.head_dim)
        out.append(_op_case(ops.SDPA_DECODE, cid, m, _x("q", q), _x("k_cache", kv), _x("v_cache", kv), note="decode"))
    for cid, (m, cache) in DECODE_LAYER.items():
        out.append(_layer_case(cid, m, tokens=1, cache=cache))
    for cid, (m, tokens) in PREFILL_LAYER.items():
        out.append(_layer_case(cid, m, tokens=tokens, cache=0))
    return out


def _layer_case(cid: str, m: LLM, tokens: int, cache: int) -> Case:
    """HF's decoder layer at batch 1: `tokens` new tokens after `cache` cached ones (decode when cache > 0)."""
    pos = torch.arange(cache, cache + tokens)[None]
    inputs = [_x("hidden", (1, tokens, m.hidden)), _rope_input("cos", m, pos, 0), _rope_input("sin", m, pos, 1)]
    if cache:
        kv = (1, m.kv_heads, cache, m.head_dim)
        inputs += [_x("k_cache", kv), _x("v_cache", kv)]
    return Case(
        cid,
        "decoder_layer",
        tuple(inputs),
        layer_flops(m, tokens, cache + tokens),
        module=lambda: decoder_layer(m).to(BF16),
        model=m.key,
        requires="transformers",
        note=f"decode, cache {cache}" if cache else f"prefill {tokens}",
    )
