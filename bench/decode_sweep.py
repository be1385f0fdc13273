"""Decode-shaped kernels (bf16, one token a sequence) under schedule variants, on a GPU: the median of 100 calls,
the L2 flushed before each, beside eager. Each variant is the default lowering with pass options changed.

    python bench/decode_sweep.py attention [--variants default,lanes16]    # GQA decode attention, 4 KV heads
    python bench/decode_sweep.py projections [--variants default,c128]      # TinyLlama's decode projections
    python bench/decode_sweep.py step A=build/a/tinyllama-bf16.json B=...  # whole decode steps, A/B [--profile]

`step` takes compiled models (`bench/models_gpu.py compile` writes them; the cubin cache beside them is used), runs
each one's prefill (random weights, seed 0), then times its decode step as a CUDA graph at the position after the
prompt, the models interleaved round by round (median of the rounds' medians), beside the bandwidth limit (the
bytes a step must move over the copy bandwidth measured in the same run). `--profile` adds each kernel's time
inside the replayed graph (torch.profiler's CUPTI records of the graph's kernels): per kernel its launches, mean
time and mean gap before it (from the end of the kernel before), the sum over the step.

Results: bench/results/attention_decode-h100-2026-11-26, bench/results/decode_projections-h100-2026-11-26.
"""

from __future__ import annotations

import argparse
import copy
import itertools
from pathlib import Path

import torch
import torch.nn.functional as F

from irforge.compiler import compile
from irforge.runtime.executor import Executor

TILE = (Path(__file__).resolve().parents[1] / "pipelines" / "loop-to-tile.pipeline").read_text()
TILE = ",".join(line.strip().rstrip(",") for line in TILE.splitlines() if line.strip() and not line.startswith("#"))


def lowering(**options: str) -> str:
    """The default lowering with `pass_name="opt=value"` options (underscores for the pass name's dashes)."""
    text = TILE
    for name, opts in options.items():
        name = name.replace("_", "-")
        text = text.replace(name, f"{name}{{{opts}}}", 1)
    return f"torch-to-tensor,tensor-to-loop,{text},tile-to-kernel,kernel-to-cuda"


ATTENTION = {
    "default": {},
    **{f"bk{k}": {"tile_chunk_reduce": f"bk={k}"} for k in (4, 8)},
    **{f"sp{s}": {"tile_split_reduce": f"splits={s}"} for s in (2, 3, 8, 16, 32, 64)},
    **{f"bm{m}": {"tile_blockify": f"bm={m}"} for m in (1, 2)},
    **{f"lanes{n}": {"tile_blockify": f"lanes={n}"} for n in (4, 8, 16, 32)},
    **{f"bk{k}lanes8": {"tile_chunk_reduce": f"bk={k}", "tile_blockify": "lanes=8"} for k in (4, 8)},
    "bk8bm2": {"tile_chunk_reduce": "bk=8", "tile_blockify": "bm=2"},
    # a short cache (a decode step's first tokens): the keys in fewer, longer chunks, a row a block
    **{f"bk{k}": {"tile_chunk_reduce": f"bk={k}"} for k in (16, 48)},
    **{f"bm1lanes{n}": {"tile_blockify": f"bm=1 lanes={n}"} for n in (8, 16, 32)},
}
ATTENTION_SHAPES = [(32, 64, 48), (32, 64, 512), (32, 64, 2048), (28, 128, 48), (28, 128, 2048), (64, 64, 48)]
PROJECTIONS = {
    "default": {},
    **{f"c{t}": {"tile_cooperative_reduce": f"threads={t}"} for t in (64, 128, 256, 512)},
    **{f"y{y}": {"tile_blockify": f"threads={y}"} for y in (1, 2, 4)},
    **{
        f"c{t}y{y}": {"tile_cooperative_reduce": f"threads={t}", "tile_blockify": f"threads={y}"}
        for t, y in ((64, 4), (128, 2), (256, 1), (32, 8), (32, 4))
    },
}
PROJECTION_SHAPES = [(2048, 2048), (5632, 2048), (2048, 11264), (2048, 2560)]  # (K, N): q/o, down, gate+up, qkv


class Attention(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def timed(fn, reps: int = 100, warmup: int = 10) -> float:
    flush = torch.empty(64 << 20, dtype=torch.int32, device="cuda")
    times = []
    for i in range(reps + warmup):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(a.elapsed_time(b) * 1e3)
    return sorted(times)[len(times) // 2]


def sweep(model, inputs, variants: dict) -> list[str]:
    """One line per variant: its time, kernels (grid, block) and any difference from eager past bf16's noise."""
    eager = copy.deepcopy(model).cuda()
    gpu = [x.cuda() for x in inputs]
    ref = eager(*gpu)
    params = {name: p.detach().cuda() for name, p in model.state_dict().items()} or None
    lines = [f"eager {timed(lambda: eager(*gpu)):7.2f}"]
    for name, options in variants.items():
        try:
            prog = compile(model, *inputs, pipeline=lowering(**options))
            exe = Executor(prog.module, params=params)
            err = (exe(*gpu)[0].float() - ref.float()).abs().max().item()
            t = timed(lambda: exe(*gpu))
            kernels = [
                (op.attributes["grid"], op.attributes["block"]) for op in prog.module.walk() if op.name == "cuda.kernel"
            ]
            lines.append(f"{name:10s} {t:7.2f} {kernels}{'' if err < 0.1 else f' ERR {err:.3f}'}")
        except Exception as e:  # a variant a pass refuses
            lines.append(f"{name:10s} -- {str(e).splitlines()[0][:80]}")
    return lines


def decode_steps(models: dict[str, str], rounds: int, reps: int, profile: bool) -> dict:
    """Each compiled model's decode step timed as a CUDA graph, interleaved (see the module's docstring)."""
    import os
    import statistics

    import numpy as np

    from irforge.models import load_compiled
    from irforge.models.gpu import OnGPU
    from irforge.models.speed import copy_bandwidth, cuda_time, decode_bytes
    from irforge.models.weights import load_weights

    runs = {}
    for name, path in models.items():
        os.environ["IRFORGE_CACHE_DIR"] = os.path.join(os.path.dirname(path), "cache")
        model = load_compiled(path)
        params = load_weights(None, model.param_types, model.dtype, model.config, seed=0, device="cuda")
        runner = OnGPU(model, params)
        prompt = np.random.default_rng(0).integers(0, model.config.vocab_size, (model.batch, model.prompt_len))
        runner("prefill", prompt, np.arange(model.prompt_len))
        ids = torch.zeros((model.batch, 1), dtype=torch.long, device="cuda")
        at = torch.tensor([model.prompt_len], dtype=torch.long, device="cuda")
        step = runner.executors["decode"]
        step(ids, at)
        nbytes = decode_bytes(params, model.batch, model.prompt_len, model.config, 2 if model.dtype != "f32" else 4)
        runs[name] = (runner, lambda step=step, ids=ids, at=at: step(ids, at), nbytes, model.batch)
    bandwidth = copy_bandwidth()
    times: dict[str, list[float]] = {n: [] for n in runs}
    for _ in range(rounds):
        for name, (_, fn, _, _) in runs.items():
            times[name].append(cuda_time(fn, reps=reps, warmup=3))
    report = {"copy_bandwidth_bytes_per_s": bandwidth, "rounds": rounds, "reps": reps, "models": {}}
    for name, (_, fn, nbytes, batch) in runs.items():
        ms = statistics.median(times[name])
        limit_ms = nbytes / bandwidth * 1e3
        row = {"path": models[name], "step_ms": ms, "round_ms": times[name], "tokens_per_s": batch / (ms / 1e3)}
        row.update(decode_bytes=nbytes, limit_ms=limit_ms, fraction_of_limit=limit_ms / ms)
        print(
            f"{name}: decode step {ms:.4f} ms ({batch / (ms / 1e3):.1f} tokens/s), {100 * limit_ms / ms:.1f}% of "
            f"the bandwidth limit ({nbytes / 1e6:.1f} MB at {bandwidth / 1e12:.3f} TB/s: {limit_ms:.4f} ms); "
            f"rounds {' '.join(f'{t:.4f}' for t in times[name])}",
            flush=True,
        )
        if profile:
            row["kernels"] = graph_kernels(fn)
            print(kernel_table(row["kernels"]), flush=True)
        report["models"][name] = row
    return report


def graph_kernels(fn, replays: int = 5) -> list[dict]:
    """Per kernel name (first launch order) of one replay of `fn`: launches, mean microseconds, mean gap before
    it (start minus the end of the kernel before it in the same replay), averaged over `replays` replays."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            fn()
            torch.cuda.synchronize()
    cuda = torch.autograd.DeviceType.CUDA
    events = [e for e in prof.events() if e.device_type == cuda and "memcpy" not in e.name.lower()]
    events.sort(key=lambda e: e.time_range.start)
    starts = [i for i, e in enumerate(events) if e.name == events[0].name] + [len(events)]
    rows: dict[str, dict] = {}
    for a, b in itertools.pairwise(starts):
        run = events[a:b]
        for i, e in enumerate(run):
            gap = e.time_range.start - run[i - 1].time_range.end if i else 0.0
            row = rows.setdefault(e.name, {"kernel": e.name, "n": 0, "us": 0.0, "gap_us": 0.0})
            row["n"] += 1
            row["us"] += e.time_range.end - e.time_range.start
            row["gap_us"] += gap
    for row in rows.values():
        row["launches"] = row["n"] // (len(starts) - 1)
        row["mean_us"] = row.pop("us") / row["n"]
        row["mean_gap_us"] = row.pop("gap_us") / row["n"]
        del row["n"]
    return list(rows.values())


def kernel_table(rows: list[dict]) -> str:
    lines = [f"  {'kernel':52} {'n':>3} {'us':>8} {'gap us':>8} {'total us':>9}"]
    for r in rows:
        total = r["launches"] * (r["mean_us"] + r["mean_gap_us"])
        name, n, us, gap = r["kernel"][:52], r["launches"], r["mean_us"], r["mean_gap_us"]
        lines.append(f"  {name:52} {n:3d} {us:8.2f} {gap:8.2f} {total:9.1f}")
    busy = sum(r["launches"] * r["mean_us"] for r in rows)
    gaps = sum(r["launches"] * r["mean_gap_us"] for r in rows)
    lines.append(f"  kernels {busy:.1f} us, gaps {gaps:.1f} us (negative: overlap under dependent launch)")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("attention", "projections", "step"))
    ap.add_argument("models", nargs="*", help="step: NAME=compiled-model.json ...")
    ap.add_argument("--variants", help="comma-separated names (default: all)")
    ap.add_argument("--shapes", help="attention: heads,head_dim,keys triples separated by ';' (default: all)")
    ap.add_argument("--rounds", type=int, default=7, help="step: rounds over the models")
    ap.add_argument("--reps", type=int, default=50, help="step: timed replays a round")
    ap.add_argument("--profile", action="store_true", help="step: each kernel's time in the replayed graph")
    ap.add_argument("--json", help="step: write the report here")
    a = ap.parse_args()
    if a.what == "step":
        import json

        models = dict(m.split("=", 1) for m in a.models)
        report = decode_steps(models, a.rounds, a.reps, a.profile)
        if a.json:
            with open(a.json, "w", encoding="utf-8") as f:
                json.dump(report, f, indent=1)
        return
    table = ATTENTION if a.what == "attention" else PROJECTIONS
    variants = {n: table[n] for n in (a.variants.split(",") if a.variants else table)}
    bf16 = torch.bfloat16
    if a.what == "attention":
        shapes = [tuple(map(int, t.split(","))) for t in a.shapes.split(";")] if a.shapes else ATTENTION_SHAPES
        for heads, d, keys in shapes:
            inputs = [torch.randn(1, heads, 1, d, dtype=bf16), *(torch.randn(1, 4, keys, d, dtype=bf16) for _ in "kv")]
            print(f"heads {heads} head dim {d} keys {keys}:", *sweep(Attention(), inputs, variants), sep="\n  ")
    else:
        for k, n in PROJECTION_SHAPES:
            lin = torch.nn.Linear(k, n, bias=False).to(bf16)
            inputs = [torch.randn(1, 1, k, dtype=bf16)]
            print(f"K {k} N {n} ({k * n * 2 / 1e6:.1f} MB):", *sweep(lin, inputs, variants), sep="\n  ")


if __name__ == "__main__":
    main()
