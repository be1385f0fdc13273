"""The two model configurations the suites take their shapes from, and the HF decoder layer the `llm` suite's
whole-layer rows run (transformers is an optional extra: `pip install -e '.[models]'`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class LLM:
    key: str  # the short name in case ids: TL, QW
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    rms_eps: float
    rope_theta: float
    family: str  # which HF decoder layer: llama or qwen2 (q, k, v projections with bias)

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim


TINYLLAMA = LLM("TL", 2048, 5632, 32, 4, 64, 32000, 1e-5, 1e4, "llama")
QWEN = LLM("QW", 3584, 18944, 28, 4, 128, 152064, 1e-6, 1e6, "qwen2")
MODELS = {m.key: m for m in (TINYLLAMA, QWEN)}  # TinyLlama-1.1B and Qwen2.5-7B


def hf_config(m: LLM):
    """The HF config of one layer of the model (random weights: nothing is downloaded)."""
    from transformers import LlamaConfig, Qwen2Config

    cls = {"llama": LlamaConfig, "qwen2": Qwen2Config}[m.family]
    cfg = cls(
        hidden_size=m.hidden,
        intermediate_size=m.intermediate,
        num_attention_heads=m.heads,
        num_key_value_heads=m.kv_heads,
        head_dim=m.head_dim,
        vocab_size=m.vocab,
        rms_norm_eps=m.rms_eps,
        rope_parameters={"rope_type": "default", "rope_theta": m.rope_theta},
        num_hidden_layers=1,
    )
    cfg._attn_implementation = "sdpa"  # what HF runs by default on a GPU
    return cfg


def decoder_layer(m: LLM):
    """`DecoderStep` around HF's `LlamaDecoderLayer` or `Qwen2DecoderLayer` at the model's real config."""
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer
    from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer

    cfg = hf_config(m)
    layer = {"llama": LlamaDecoderLayer, "qwen2": Qwen2DecoderLayer}[m.family](cfg, layer_idx=0)
    return DecoderStep(layer, cfg)


def rope_tables(m: LLM, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """The rotary (cos, sin) tables at these positions, [*positions.shape, head_dim], as HF's default rotary
    embedding computes them (frequencies in f32, then cast to the activations' type)."""
    d = m.head_dim
    inv_freq = 1.0 / (m.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64, device=positions.device).float() / d))
    freqs = positions.float()[..., None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


class DecoderStep(torch.nn.Module):
    """One decoder layer: hidden states and the rotary tables in, hidden states out. With `k_cache` and `v_cache`
    ([batch, kv_heads, length, head_dim]) it is a decode step reading that cache (through HF's `DynamicCache`, as
    `generate` does); without, a causal prefill."""

    def __init__(self, layer, config):
        super().__init__()
        self.layer = layer
        self.config = config

    def forward(self, hidden, cos, sin, k_cache=None, v_cache=None):
        from transformers import DynamicCache

        cache = None
        if k_cache is not None:
            cache = DynamicCache(config=self.config)
            cache.update(k_cache, v_cache, 0)
        out = self.layer(hidden, position_embeddings=(cos, sin), past_key_values=cache, use_cache=cache is not None)
        return out[0] if isinstance(out, tuple) else out
