"""Decode-shaped kernels (bf16, one token a sequence) under schedule variants, on a GPU: the median of 100 calls,
the L2 flushed before each, beside eager. Each variant is the default lowering with pass options changed.

    python bench/decode_sweep.py attention [--variants default,lanes16]    # GQA decode attention, 4 KV heads
    python bench/decode_sweep.py projections [--variants default,c128]      # TinyLlama's decode projections

Results: bench/results/attention_decode-h100-2026-11-26, bench/results/decode_projections-h100-2026-11-26.
"""

from __future__ import annotations

import argparse
import copy
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("attention", "projections"))
    ap.add_argument("--variants", help="comma-separated names (default: all)")
    ap.add_argument("--shapes", help="attention: heads,head_dim,keys triples separated by ';' (default: all)")
    a = ap.parse_args()
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
