"""How fast a model generates on the GPU: irforge's prefill and decode step beside HF eager's and torch.compile's
on the same prompt, and the decode step against its bandwidth limit.

Times are CUDA-event medians after warm-up. The decode limit is the bytes one step must move (every weight once,
the embedding's B rows only, and the K and V cache up to the current length) over the copy bandwidth measured on
the same GPU (a large device-to-device copy), so `fraction = limit time / measured time`.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

import numpy as np


@dataclass
class Speed:
    system: str
    prefill_ms: float
    prefill_tokens_per_s: float
    decode_ms: float  # one step (B tokens)
    decode_tokens_per_s: float


def cuda_time(fn, reps: int = 20, warmup: int = 3) -> float:
    """Median milliseconds of `fn()` on the current stream."""
    import torch

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def copy_bandwidth() -> float:
    """Bytes per second of a 1 GiB device-to-device copy (read + write counted)."""
    import torch

    src = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    ms = cuda_time(lambda: dst.copy_(src), reps=10)
    return 2 * src.numel() * 4 / (ms / 1e3)


def irforge_speed(runner, prompt, steps: int = 16) -> Speed:
    """The prefill (cache reset each time) and the decode step at the position after the prompt, through `OnGPU`:
    `steps` steps back to back, per step, as a generation issues them (and as `compiled_speed` times
    torch.compile's), so that the host's work for a step overlaps the step before it on the GPU."""
    import torch

    b, s = prompt.shape
    pos = np.arange(s)

    def prefill():
        runner.reset()
        runner("prefill", prompt, pos)

    prefill_ms = cuda_time(prefill, reps=10)
    ids = torch.zeros((b, 1), dtype=torch.long, device="cuda")
    at = torch.tensor([s], dtype=torch.long, device="cuda")
    decode = runner.executors["decode"]

    def decode_steps():
        for _ in range(steps):
            decode(ids, at)

    decode_ms = cuda_time(decode_steps, reps=5) / steps
    return Speed("irforge", prefill_ms, b * s / (prefill_ms / 1e3), decode_ms, b / (decode_ms / 1e3))


def hf_speed(lm, prompt, system: str = "HF eager", new_tokens: int = 16) -> Speed:
    """HF's `generate` (greedy, its dynamic cache): the prefill is `generate` of one token, a decode step the
    difference to `generate` of `new_tokens`, per new token."""
    import torch

    ids = torch.as_tensor(prompt, device="cuda")

    def gen(n):
        with torch.no_grad():
            lm.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)

    one = cuda_time(lambda: gen(1), reps=5, warmup=2)
    many = cuda_time(lambda: gen(new_tokens), reps=5, warmup=1)
    step = (many - one) / (new_tokens - 1)
    b, s = ids.shape
    return Speed(system, one, b * s / (one / 1e3), step, b / (step / 1e3))


def compiled_speed(lm, prompt, new_tokens: int = 16, reps: int = 5) -> Speed:
    """torch.compile as HF recommends it (`generation.HFStatic`): HF's static cache, the decode step compiled with
    `mode="reduce-overhead"` (CUDA graphs), the prefill eager. A decode step is the time of `new_tokens - 1` steps
    after a prefill (not timed: the cache must restart where the steps fit), per step; the first runs compile."""
    import torch

    from .generate import HFStatic

    b, s = prompt.shape
    steps = HFStatic(lm, b, s + new_tokens, compile=lambda f: torch.compile(f, mode="reduce-overhead", fullgraph=True))
    ids = torch.as_tensor(prompt, device="cuda")
    token = torch.zeros((b, 1), dtype=torch.long, device="cuda")
    prefill_ms = cuda_time(lambda: steps.prefill(ids), reps=reps, warmup=2)

    def decode_steps():
        for _ in range(new_tokens - 1):
            steps.decode(token)

    runs = []
    for _ in range(reps + 3):  # 3 warm-up runs: compile, CUDA-graph warm-up and recording
        steps.prefill(ids)
        runs.append(cuda_time(decode_steps, reps=1, warmup=0) / (new_tokens - 1))
    step = statistics.median(runs[3:])
    return Speed("torch.compile", prefill_ms, b * s / (prefill_ms / 1e3), step, b / (step / 1e3))


def decode_bytes(params: dict, batch: int, position: int, config, dtype_bytes: int) -> int:
    """Bytes one decode step must move at `position`: each weight once (B rows of the embedding table, which a
    tied head reads whole), and the cache's K and V up to the position."""
    total = 0
    for name, t in params.items():
        n = t.numel() * t.element_size()
        if name == "model.embed_tokens.weight" and not config.tie_word_embeddings:
            n = batch * t.shape[1] * t.element_size()
        total += n
    kv = 2 * config.num_hidden_layers * batch * config.num_key_value_heads * (position + 1)
    from .hf import head_dim

    return total + kv * head_dim(config) * dtype_bytes


def as_dict(s: Speed) -> dict:
    return asdict(s)
