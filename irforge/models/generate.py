"""Greedy decoding with a compiled model: the prefill, then one decode step per new token, the KV cache kept
between them (the programs' state).

    tokens = greedy(Interpreted(model, params), prompt_ids, n)    # any level with an interpreter (the CPU)
    tokens = greedy(OnGPU(model, params), prompt_ids, n)          # the cuda level: executors, the decode step a
                                                                  # CUDA graph (irforge.models.gpu)
    hf_tokens = hf_greedy(hf_model(config, params), prompt_ids, n)

A runner is called as `runner(step_name, input_ids, cache_position)` and returns the last position's logits
`[B, V]`; it owns the cache, which starts zero.
"""

from __future__ import annotations

import numpy as np
import torch

from .hf import DTYPES, build_lm
from .program import run


class Interpreted:
    """The steps on their level's reference interpreter (numpy), the cache a dict of arrays."""

    def __init__(self, model, params: dict):
        from irforge.runner import to_numpy
        from irforge.scalar_ops import numpy_dtype

        self.model = model
        self.params = {k: to_numpy(v) if isinstance(v, torch.Tensor) else v for k, v in params.items()}
        some = next(iter(model.steps.values()))
        self.state = {n: np.zeros(t.shape, numpy_dtype(t.dtype)) for n, t in some.state.items()}

    def __call__(self, step: str, input_ids, cache_position) -> np.ndarray:
        inputs = {"input_ids": np.asarray(input_ids), "cache_position": np.asarray(cache_position)}
        (logits,) = run(self.model.steps[step], inputs, self.params, self.state)
        return logits[:, -1]


def greedy(runner, prompt, n: int) -> np.ndarray:
    """`n` new tokens per sequence of `prompt` [B, S], each the argmax of the logits (ties to the lowest id). The
    tokens stay where the runner's logits are (numpy arrays or CUDA tensors) until the end."""
    prompt = np.asarray(prompt, dtype=np.int64)
    s = prompt.shape[1]
    logits = runner("prefill", prompt, np.arange(s, dtype=np.int64))
    tokens = [logits.argmax(-1)]
    for t in range(n - 1):
        logits = runner("decode", tokens[-1][:, None], np.array([s + t], dtype=np.int64))
        tokens.append(logits.argmax(-1))
    return np.stack([np.asarray(t.cpu()) if isinstance(t, torch.Tensor) else t for t in tokens], axis=1)


def hf_model(config, params: dict, dtype: str = "f32", device="cpu"):
    """HF's own model with these weights (the reference)."""
    lm = build_lm(config, dtype, device)
    weights = {k: v.to(device) for k, v in params.items() if k in dict(lm.named_parameters(remove_duplicate=False))}
    lm.load_state_dict(weights, strict=False)
    return lm


@torch.no_grad()
def hf_greedy(lm, prompt, n: int) -> np.ndarray:
    """HF's `generate`, greedy, its default (dynamic) cache: the reference tokens."""
    ids = torch.as_tensor(np.asarray(prompt), device=lm.device)
    out = lm.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
    return out[:, ids.shape[1] :].cpu().numpy()


@torch.no_grad()
def hf_step_logits(lm, prompt, new_tokens) -> list[np.ndarray]:
    """HF's logits of the last position after the prompt and after each of `new_tokens` (fed one at a time)."""
    ids = torch.as_tensor(np.asarray(prompt), device=lm.device)
    r = lm(input_ids=ids, use_cache=True)
    out = [r.logits[:, -1].float().cpu().numpy()]
    for t in np.asarray(new_tokens).T:
        step = torch.as_tensor(t[:, None], device=lm.device)
        r = lm(input_ids=step, past_key_values=r.past_key_values, use_cache=True)
        out.append(r.logits[:, -1].float().cpu().numpy())
    return out


class HFStatic:
    """HF's model stepped by hand over HF's `StaticCache`, as HF's static-cache recipe does: `prefill(ids)` (the
    cache reset first) and `decode(ids)` each return the last position's logits `[B, V]` as float32 copies.

    `compile` wraps the decode step (`torch.compile(fn, mode="reduce-overhead")`: CUDA graphs); the prefill stays
    eager, as in HF's `generate`. The cache is allocated here, outside any compiled region, so that HF marks its
    tensors as static addresses (a compiled step that allocated them would mutate graph inputs, and skip CUDA graphs).
    """

    def __init__(self, lm, batch: int, max_len: int, compile=None):
        from transformers.cache_utils import StaticCache

        from .hf import head_dim

        self.lm = lm
        self.cache = StaticCache(config=lm.config, max_cache_len=max_len)
        p = next(lm.parameters())
        c = lm.config
        self.cache.early_initialization(batch, c.num_key_value_heads, head_dim(c), p.dtype, p.device)
        self._decode = compile(self._step) if compile else self._step

    def _step(self, ids, cache):
        return self.lm(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1).logits

    @torch.no_grad()
    def prefill(self, ids) -> torch.Tensor:
        self.cache.reset()
        return self._step(torch.as_tensor(ids, device=self.lm.device), self.cache)[:, -1].to(torch.float32, copy=True)

    @torch.no_grad()
    def decode(self, ids) -> torch.Tensor:
        # A new step for CUDA-graph trees: the last replay's outputs may now be overwritten, so each call copies its
        # logits out of the graph's memory before returning them.
        torch.compiler.cudagraph_mark_step_begin()
        logits = self._decode(torch.as_tensor(ids, device=self.lm.device), self.cache)
        return logits[:, -1].to(torch.float32, copy=True)


__all__ = ["DTYPES", "HFStatic", "Interpreted", "greedy", "hf_greedy", "hf_model", "hf_step_logits"]
