"""HF causal LMs as irforge captures them: the model built from its config, and one step of it with a static KV
cache that the step updates in place.

`CausalLMStep` is the documented wrapper around HF's own forward: `model(input_ids, past_key_values=cache,
logits_to_keep=1)` with HF's `StaticCache`, whose per-layer key and value tensors are registered as buffers of the
decoder layers (`model.layers.{i}.k_cache`, `.v_cache`), so that torch.export sees the cache update
(`index_copy_`) as a mutation of those buffers: the captured program's state. Everything else, masks and positions
included, is HF's code as it ships; the wrapper only sets the cache's write position from the `cache_position`
input, as HF's own export recipe (`TorchExportableModuleWithStaticCache`) does, each layer's copy of it made as the
layer starts (a forward pre-hook), so that every layer is the same function of the values before it.
"""

from __future__ import annotations

import torch
from torch import nn

from irforge.diagnostics import error

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def build_lm(config, dtype: str = "f32", device="meta") -> nn.Module:
    """The HF *ForCausalLM of `config`, in eval mode; on the meta device its weights take no memory."""
    from transformers import AutoModelForCausalLM

    with torch.device(device):
        lm = AutoModelForCausalLM.from_config(config, dtype=DTYPES[dtype])
    return lm.eval()


def computed_buffers(config) -> dict[str, torch.Tensor]:
    """The buffers an HF model computes from its config rather than loads (the rotary embedding's inverse
    frequencies), by param name: the model's own rotary module, built on the CPU."""
    lm = build_lm(config, "f32", "meta")
    rotary = type(lm.model.rotary_emb)(config=config)
    return {f"model.rotary_emb.{n}": b for n, b in rotary.named_buffers()}


def head_dim(config) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


class CausalLMStep(nn.Module):
    """`(input_ids [B, S], cache_position [S]) -> logits of the last position [B, 1, V]`, writing the S tokens' keys
    and values into the cache at `cache_position`: a prefill when S is the prompt, a decode step when S is 1."""

    def __init__(self, lm: nn.Module, batch: int, max_len: int):
        super().__init__()
        from transformers.cache_utils import StaticCache

        self.lm = lm
        self.cache = StaticCache(config=lm.config, max_cache_len=max_len)
        p = next(lm.parameters())
        c = lm.config
        self.cache.early_initialization(batch, c.num_key_value_heads, head_dim(c), p.dtype, p.device)
        for layer, decoder in zip(self.cache.layers, lm.model.layers):
            decoder.register_buffer("k_cache", layer.keys, persistent=False)
            decoder.register_buffer("v_cache", layer.values, persistent=False)
            decoder.register_forward_pre_hook(self._at_start(layer))

    def _at_start(self, layer):
        """A hook giving the layer its own copy of the write position when the layer starts (its cache update
        advances it in place), so that the copy is the layer's op, not one op per layer before the first."""

        def hook(module, args):
            layer.cumulative_length = self._start.clone()

        return hook

    def forward(self, input_ids, cache_position):
        self._start = cache_position[0]
        for layer, decoder in zip(self.cache.layers, self.lm.model.layers):
            # through the module, so that export sees its buffers (HF's StaticLayer holds plain tensors)
            layer.keys, layer.values = decoder.k_cache, decoder.v_cache
            layer.cumulative_length = self._start  # what the mask construction reads before the layers
        out = self.lm(input_ids=input_ids, past_key_values=self.cache, use_cache=True, logits_to_keep=1)
        return out.logits


CACHE_ALIGN = 64  # a KV cache's slots come in whole chunks of keys: `cache_capacity`


def cache_capacity(max_len: int) -> int:
    """Slots of the KV cache holding `max_len` tokens: `max_len` rounded up to CACHE_ALIGN. Attention's keys then
    come in whole chunks of tensor-core atoms (a cache of 513 kept Qwen2.5-7B's 512-token prefill on the SIMT
    path); the slots past `max_len` are never written, and the causal mask leaves every slot past a query's
    position out of its softmax, so they change no result."""
    return -(-max_len // CACHE_ALIGN) * CACHE_ALIGN


def check_sizes(config, batch: int, seq: int, max_len: int) -> None:
    if batch < 1 or seq < 1:
        raise error(f"batch and sequence length must be positive, got batch {batch}, {seq} token(s)")
    if max_len < seq:
        raise error(f"the cache holds {max_len} token(s), fewer than the {seq} of the prompt")
    if max_len > config.max_position_embeddings:
        raise error(f"the cache length {max_len} exceeds the model's {config.max_position_embeddings} positions")
