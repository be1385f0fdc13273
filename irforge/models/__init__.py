"""Whole models: HF Llama-family causal LMs captured whole, compiled as a prefill and a decode step that share a
KV cache, each decoder layer compiled once (docs/models.md).

    model = compile_model("tinyllama-1.1b", dtype="bf16", batch=1, prompt_len=32, max_len=64, level="cuda")
    model.steps["prefill"], model.steps["decode"]      # ModelStep: distinct segments + their instances
    params = load_weights(None, model.param_types, "bf16", model.config)  # random (seeded); or a safetensors
                                                                        # directory, or a GGUF file (weights.py)

The architecture comes from a built-in config (`configs.BUILTIN`), a model directory or a config.json. The model is
built on the meta device (no weights in memory), wrapped by `hf.CausalLMStep` (HF's forward with HF's static cache
as buffers) and captured twice: with the prompt's length (the prefill) and with one token (the decode step). Each
capture is split into segments at the decoder layers (`program.split_layers`), and each distinct segment is
lowered once. Compiled models are cached on disk (`$IRFORGE_CACHE_DIR/models`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

from .program import ModelStep, code_version, lower, repeat_layers, run, split_layers


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
    # "wall", "cpu" (all processes and threads: what a busy machine does not inflate), each step's capture / lower /
    # nvrtc (wall)
    seconds: dict[str, float] = field(default_factory=dict)
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
        t, cpu = self.seconds["wall"], self.seconds.get("cpu")
        took = f"{t:.1f} s" + (f" ({cpu:.1f} s of CPU)" if cpu is not None else "")
        return (
            f"{self.spec} ({self.dtype}, batch {self.batch}, prompt {self.prompt_len}, cache {self.max_len}) at the "
            f"{self.level} level in {took}{' (cached)' if self.cached else ''}; " + "; ".join(parts)
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


def instances_of(step: ModelStep, segment: str) -> str:
    """` x22`: how many layers run a segment ("" for one outside the layers)."""
    users = step.users(segment)
    return f" x{len(users)}" if any(users) else ""


def _ranges(scopes: list[str]) -> str:
    """`model.layers.0 .. model.layers.21` for a run of consecutive layers (else the list)."""
    import re

    nums = [re.search(r"(\d+)$", s) for s in scopes]
    if all(nums) and len(scopes) > 2:
        idx = [int(m.group(1)) for m in nums]
        if idx == list(range(idx[0], idx[0] + len(idx))):
            return f"{scopes[0]} .. {scopes[-1]}"
    return ", ".join(scopes)


def capture_step(
    config, name: str, dtype: str, batch: int, seq: int, max_len: int, whole: bool = False
) -> tuple[ModelStep, dict]:
    """One step (`seq` tokens per sequence at a time) of the model, captured on the meta device and split at its
    decoder layers; returns it (at the torch level) and the types of the params it reads.

    Unless `whole`, a model whose layers are configured alike is captured with two layers and extended to all of
    them by induction (`program.repeat_layers`): export's time grows with the layers, and they are one segment."""
    n = config.num_hidden_layers
    if not whole and n > 2 and _layers_alike(config):
        step, params = _capture_split(_with_layers(config, 2), name, dtype, batch, seq, max_len)
        if repeat_layers(step, "model.layers.", n, params):
            return step, params
    return _capture_split(config, name, dtype, batch, seq, max_len)


def _layers_alike(config) -> bool:
    """No per-layer setting (a list with an entry per layer, as Qwen2's `layer_types`) differs between layers."""
    n = config.num_hidden_layers
    lists = [v for v in config.to_dict().values() if isinstance(v, list) and len(v) == n]
    return all(all(x == v[0] for x in v) for v in lists)


def _with_layers(config, k: int):
    """A copy of `config` with `k` decoder layers (its per-layer lists cut to `k` entries)."""
    import copy

    small = copy.deepcopy(config)
    n = config.num_hidden_layers
    for key, v in config.to_dict().items():
        if isinstance(v, list) and len(v) == n:
            setattr(small, key, v[:k])
    small.num_hidden_layers = k
    return small


def _capture_split(config, name, dtype, batch, seq, max_len) -> tuple[ModelStep, dict]:
    import torch

    from irforge.dialects.torch.capture import capture

    from .hf import CausalLMStep, build_lm, cache_capacity

    lm = build_lm(config, dtype, "meta")
    step = CausalLMStep(lm, batch, cache_capacity(max_len))
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


# A step's worker process costs seconds to start (torch, transformers); a model this wide (every published one)
# takes longer to capture and lower than that, a test's tiny config (hidden size 64) far less.
PARALLEL_MIN_HIDDEN = 512


def compile_model(
    spec,
    *,
    dtype: str = "f32",
    batch: int = 1,
    prompt_len: int = 32,
    max_len: int | None = None,
    level: str = "cuda",
    cache: bool = True,
    parallel: bool | None = None,
    instrumentations=(),
    tuning: str | None = None,
) -> CompiledModel:
    """Capture and lower a model's prefill (`prompt_len` tokens) and decode step, for a cache of `max_len` tokens
    (default: twice the prompt). `spec` is a built-in name, a model directory, a config.json, or an HF config.

    The two steps compile in two processes at once (`parallel`; by default for a model of PARALLEL_MIN_HIDDEN or
    more, not where instrumentations print passes: a process costs seconds to start, which only a large model
    repays); at the cuda level each
    distinct kernel is also compiled by NVRTC for the default target (its cubin cache is the runtime's). The result
    is cached on disk, keyed by the config, the sizes, the level and the sources of irforge, torch and transformers.
    `tuning` replays the tuned schedules of that tuning database ("" for the default one; `irforge tune MODEL`
    fills it), its winners part of the cache key.
    """
    from irforge.cache import cache_root

    from .configs import load_config
    from .hf import check_sizes

    config = load_config(spec) if isinstance(spec, str) else spec
    max_len = max_len or 2 * prompt_len
    check_sizes(config, batch, prompt_len, max_len)
    spec_name = spec if isinstance(spec, str) else type(config).__name__
    sizes = (("prefill", prompt_len), ("decode", 1))
    jobs = [(config, name, dtype, batch, seq, max_len, level, tuning) for name, seq in sizes]
    path = cache_root() / "models" / f"{_cache_key(jobs)}.json" if cache else None
    t, cpu = time.perf_counter(), _cpu_seconds()
    if path is not None and path.exists():
        done = json.loads(path.read_text())
        cached = True
    else:
        if parallel is None:
            parallel = config.hidden_size >= PARALLEL_MIN_HIDDEN
        if instrumentations or not parallel:
            done = [_compile_step(*job, instrumentations=instrumentations) for job in jobs]
        else:
            done = _in_workers(jobs)
        cached = False
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(done))
            tmp.replace(path)
    steps = {d["step"]["name"]: load_step(d["step"]) for d in done}
    params = {k: _type(v) for d in done for k, v in d["params"].items()}
    seconds = {k: v for d in done for k, v in d["seconds"].items()}
    if cached:
        seconds = {}
    seconds["wall"] = time.perf_counter() - t
    seconds["cpu"] = _cpu_seconds() - cpu
    return CompiledModel(spec_name, config, dtype, batch, prompt_len, max_len, steps, params, seconds, cached)


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (the compile workers), all threads."""
    import resource

    r, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


def save_compiled(model: CompiledModel, path: str) -> None:
    """Write a compiled model (config, sizes, both steps' IR) to a JSON file `load_compiled` reads back."""
    data = {
        "spec": model.spec,
        "config": model.config.to_dict(),
        "sizes": [model.dtype, model.batch, model.prompt_len, model.max_len],
        "steps": [dump_step(s) for s in model.steps.values()],
        "params": {k: _untype(t) for k, t in model.param_types.items()},
        "seconds": model.seconds,
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)


def load_compiled(path: str) -> CompiledModel:
    from transformers import AutoConfig

    from irforge.diagnostics import error

    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise error(f"cannot read the compiled model '{path}': {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise error(f"'{path}' is not a compiled model: {e.msg} (line {e.lineno})") from None
    if not isinstance(data, dict) or not {"config", "sizes", "steps", "params"} <= set(data):
        raise error(f"'{path}' is not a compiled model (irforge compile MODEL --save FILE writes one)")
    fields = dict(data["config"])
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    config._attn_implementation = "sdpa"
    steps = {d["name"]: load_step(d) for d in data["steps"]}
    params = {k: _type(t) for k, t in data["params"].items()}
    return CompiledModel(data["spec"], config, *data["sizes"], steps, params, data["seconds"], cached=True)


def _in_workers(jobs) -> list:
    """Each job in a worker process (`irforge.models.worker`), all at once."""
    import pickle
    import subprocess
    import sys

    procs = []
    for job in jobs:
        p = subprocess.Popen(
            [sys.executable, "-m", "irforge.models.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        p.stdin.write(pickle.dumps(job))
        p.stdin.close()
        procs.append(p)
    results = []
    for p in procs:
        data = p.stdout.read()
        if p.wait() != 0 or not data:
            raise RuntimeError(f"the model compile worker exited with status {p.returncode}")
        ok, value = pickle.loads(data)
        if not ok:
            raise value
        results.append(value)
    return results


def _compile_step(config, name, dtype, batch, seq, max_len, level, tuning, instrumentations=()) -> dict:
    """One step captured and lowered (a worker's job): its serialized form, param types and timings."""
    t = time.perf_counter()
    step, params = capture_step(config, name, dtype, batch, seq, max_len)
    seconds = {f"capture {name}": time.perf_counter() - t}
    t = time.perf_counter()
    lower(step, level, instrumentations, tuning)
    seconds[f"lower {name}"] = time.perf_counter() - t
    if level == "cuda":
        t = time.perf_counter()
        _nvrtc(step)
        seconds[f"nvrtc {name}"] = time.perf_counter() - t
    return {"step": dump_step(step), "params": {k: _untype(v) for k, v in params.items()}, "seconds": seconds}


def _nvrtc(step: ModelStep) -> None:
    """Compile every kernel of the step to a cubin for the default target (into the runtime's cache), on a thread
    per core (NVRTC releases the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    from irforge.dialects.cuda import ops as C
    from irforge.runtime.nvrtc import compile_cuda, default_arch

    arch = default_arch()
    kernels = [op for seg in step.segments.values() for op in seg.module.body.ops if isinstance(op, C.CudaKernelOp)]
    with ThreadPoolExecutor(os.cpu_count()) as pool:
        done = [pool.submit(compile_cuda, k.attributes["source"], k.attributes["sym_name"], arch=arch) for k in kernels]
        for f in done:
            f.result()


def _cache_key(jobs) -> str:
    import hashlib

    import torch
    import transformers

    from irforge.tune.db import TuneDB

    config, tuning = jobs[0][0], jobs[0][-1]
    winners = None
    if tuning is not None:
        db = TuneDB.existing(tuning or None)
        winners = db.winners_digest() if db else "none"
    what = [config.to_json_string(), [j[1:] for j in jobs], code_version(), torch.__version__, transformers.__version__]
    what.append(winners)
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _type(t):
    from irforge.types import ScalarType, TensorType

    return TensorType(ScalarType(t[0]), tuple(t[1]))


def _untype(t):
    return [t.dtype.name, list(t.shape)]


def dump_step(step: ModelStep) -> dict:
    """A step as JSON data: its segments as IR text."""
    from dataclasses import asdict

    from irforge.printer import print_module

    return {
        "name": step.name,
        "level": step.level,
        "segments": {n: print_module(s.module) for n, s in step.segments.items()},
        "instances": [asdict(i) for i in step.instances],
        "inputs": [[n, _untype(t)] for n, t in step.inputs],
        "outputs": step.outputs,
        "output_types": [_untype(t) for t in step.output_types],
        "state": {n: _untype(t) for n, t in step.state.items()},
    }


def load_step(d: dict) -> ModelStep:
    from irforge.parser import parse_module

    from .program import Instance, Segment

    segments = {n: Segment(n, parse_module(text, f"<{d['name']} @{n}>")) for n, text in d["segments"].items()}
    return ModelStep(
        d["name"],
        segments,
        [Instance(**i) for i in d["instances"]],
        [(n, _type(t)) for n, t in d["inputs"]],
        d["outputs"],
        [_type(t) for t in d["output_types"]],
        {n: _type(t) for n, t in d["state"].items()},
        d["level"],
    )


__all__ = [
    "CompiledModel",
    "ModelStep",
    "capture_step",
    "compile_model",
    "describe",
    "dump_step",
    "load_compiled",
    "load_step",
    "lower",
    "run",
    "save_compiled",
    "split_layers",
]
