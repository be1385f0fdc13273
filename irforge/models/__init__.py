"""Whole models: HF Llama-family causal LMs captured whole, compiled as a prefill and a decode step that share a
KV cache, each decoder layer compiled once (docs/models.md).

    model = compile_model("tinyllama-1.1b", dtype="bf16", batch=1, prompt_len=32, max_len=64, level="cuda")
    model.steps["prefill"], model.steps["decode"]      # ModelStep: distinct segments + their instances
    params = load_weights(model, source=None, seed=0)  # random (seeded), a safetensors directory or a GGUF file

The architecture comes from a built-in config (`configs.BUILTIN`), a model directory or a config.json. The model is
built on the meta device (no weights in memory), wrapped by `hf.CausalLMStep` (HF's forward with HF's static cache
as buffers) and captured twice: with the prompt's length (the prefill) and with one token (the decode step). Each
capture is split into segments at the decoder layers (`program.split_layers`), and each distinct segment is
lowered once, through a cache on disk keyed by its IR, the target level and irforge's sources.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from .program import ModelStep, lower, run, split_layers

DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "irforge", "segments")


@dataclass
class CompiledModel:
    """A model's prefill and decode steps at one level, with what they were compiled for."""

    spec: str
    config: object
    dtype: str
    batch: int
    prompt_len: int
    max_len: int
    steps: dict[str, ModelStep]
    param_types: dict[str, object]  # every param the steps read, by the model's name
    seconds: dict[str, float] = field(default_factory=dict)  # capture / lower times
    cached: bool = False  # read from the compile cache

    @property
    def level(self) -> str:
        return next(iter(self.steps.values())).level

    def summary(self) -> str:
        """One line: what was compiled, how each step splits, how long it took."""
        parts = []
        for name, step in self.steps.items():
            counts = ", ".join(f"@{s} x{len(step.users(s))}" for s in step.segments)
            parts.append(f"{name}: {counts}")
        t = sum(self.seconds.values())
        return (
            f"{self.spec} ({self.dtype}, batch {self.batch}, prompt {self.prompt_len}, cache {self.max_len}) at the "
            f"{self.level} level in {t:.1f} s{' (cached)' if self.cached else ''}; " + "; ".join(parts)
        )


def describe(model: CompiledModel, **print_options) -> str:
    """Each step's distinct segments, each printed once, after a comment naming the instances that run it."""
    from irforge.printer import print_module

    out = []
    for name, step in model.steps.items():
        for seg_name, seg in step.segments.items():
            users = step.users(seg_name)
            where = _ranges(users) if any(users) else "the top level"
            out.append(f"// {name} step, @{seg_name}: run {len(users)} time(s), by {where}\n")
            out.append(print_module(seg.module, **print_options))
    return "".join(out)


def _ranges(scopes: list[str]) -> str:
    """`model.layers.0 .. model.layers.21` for a run of consecutive layers (else the list)."""
    import re

    nums = [re.search(r"(\d+)$", s) for s in scopes]
    if all(nums) and len(scopes) > 2:
        idx = [int(m.group(1)) for m in nums]
        if idx == list(range(idx[0], idx[0] + len(idx))):
            return f"{scopes[0]} .. {scopes[-1]}"
    return ", ".join(scopes)


def capture_step(config, name: str, dtype: str, batch: int, seq: int, max_len: int) -> tuple[ModelStep, dict]:
    """One step (`seq` tokens per sequence at a time) of the model, captured on the meta device and split at its
    decoder layers; returns it (at the torch level) and the types of the params it reads."""
    import torch

    from irforge.dialects.torch.capture import capture

    from .hf import CausalLMStep, build_lm

    lm = build_lm(config, dtype, "meta")
    step = CausalLMStep(lm, batch, max_len)
    ids = torch.zeros((batch, seq), dtype=torch.long, device="meta")
    pos = torch.arange(seq, device="meta")
    captured = capture(step, (ids, pos), ["input_ids", "cache_position"], values=False)
    func = captured.module.body.ops[0]
    scopes = _drop_wrapper_prefix(func, captured.scopes, "lm.")
    params = {op.attributes["sym"].name: op.result.type for op in func.body.ops if op.name == "torch.param"}
    return split_layers(func, scopes, "model.layers.", name), params


def _drop_wrapper_prefix(func, scopes: dict, prefix: str) -> dict:
    """Name params, state and scopes as the HF model does (`model.layers.0...`, not the wrapper's `lm.model...`)."""
    from irforge.attributes import SymbolRef

    strip = lambda s: s.removeprefix(prefix)
    for op in func.body.ops:
        if op.name == "torch.param":
            op.attributes["sym"] = SymbolRef(strip(op.attributes["sym"].name))
            op.results[0].name_hint = strip(op.results[0].name_hint)
    names = func.state_names()
    if names:
        func.attributes["state"] = tuple(strip(n) for n in names)
        for (_, arg, _), n in zip(func.state_pairs(), names):
            arg.name_hint = strip(n)
    return {op: strip(s) for op, s in scopes.items()}


def compile_model(
    spec,
    *,
    dtype: str = "f32",
    batch: int = 1,
    prompt_len: int = 32,
    max_len: int | None = None,
    level: str = "cuda",
    cache_dir: str | None = DEFAULT_CACHE,
    instrumentations=(),
) -> CompiledModel:
    """Capture and lower a model's prefill (`prompt_len` tokens) and decode step, for a cache of `max_len` tokens
    (default: twice the prompt). `spec` is a built-in name, a model directory, a config.json, or an HF config."""
    from .configs import load_config
    from .hf import check_sizes

    config = load_config(spec) if isinstance(spec, str) else spec
    max_len = max_len or 2 * prompt_len
    check_sizes(config, batch, prompt_len, max_len)
    steps, params, seconds = {}, {}, {}
    for name, seq in (("prefill", prompt_len), ("decode", 1)):
        t = time.perf_counter()
        steps[name], p = capture_step(config, name, dtype, batch, seq, max_len)
        params.update(p)
        seconds[f"capture {name}"] = time.perf_counter() - t
        t = time.perf_counter()
        lower(steps[name], level, instrumentations, cache_dir)
        seconds[f"lower {name}"] = time.perf_counter() - t
    spec_name = spec if isinstance(spec, str) else type(config).__name__
    return CompiledModel(spec_name, config, dtype, batch, prompt_len, max_len, steps, params, seconds)


__all__ = ["CompiledModel", "ModelStep", "capture_step", "compile_model", "describe", "lower", "run", "split_layers"]
