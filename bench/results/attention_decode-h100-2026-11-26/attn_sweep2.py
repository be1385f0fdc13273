"""Decode attention (GQA, bf16) under schedule variants: median us per call (L2 flushed before each), vs eager."""
import sys

import torch
import torch.nn.functional as F

from irforge.compiler import compile
from irforge.runtime.executor import Executor

BASE = open("pipelines/loop-to-tile.pipeline").read()
BASE = ",".join(l.strip().rstrip(",") for l in BASE.splitlines() if l.strip() and not l.startswith("#"))


def pipe(**opts):
    text = BASE
    for p, o in opts.items():
        text = text.replace(p.replace("_", "-"), f"{p.replace('_', '-')}{{{o}}}", 1)
    return f"torch-to-tensor,tensor-to-loop,{text},tile-to-kernel,kernel-to-cuda"


VARIANTS = {
    "default": pipe(),
    "lanes16": pipe(tile_blockify="lanes=16"),
    "lanes32": pipe(tile_blockify="lanes=32"),
    "lanes8": pipe(tile_blockify="lanes=8"),
}


class M(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def timed(fn, reps=100):
    flush = torch.empty(64 << 20, dtype=torch.int32, device="cuda")
    ts = []
    for i in range(reps + 10):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        if i >= 10:
            ts.append(a.elapsed_time(b) * 1e3)
    return sorted(ts)[len(ts) // 2]


for heads, d, L in [(32, 64, 48), (32, 64, 512), (32, 64, 2048), (28, 128, 48), (28, 128, 2048), (64, 64, 48)]:
    cpu = [torch.randn(1, heads, 1, d), torch.randn(1, 4, L, d), torch.randn(1, 4, L, d)]
    cpu = [x.to(torch.bfloat16) for x in cpu]
    gpu = [x.cuda() for x in cpu]
    ref = M()(*gpu)
    e = timed(lambda: M()(*gpu))
    line = [f"h{heads} d{d} L{L}: eager {e:6.2f}"]
    for name, p in VARIANTS.items():
        try:
            prog = compile(M(), *cpu, pipeline=p)
            exe = Executor(prog.module)
            out = exe(*gpu)[0]
            err = (out.float() - ref.float()).abs().max().item()
            t = timed(lambda: exe(*gpu))
            kernels = sum(1 for op in prog.module.walk() if op.name == "cuda.kernel")
            line.append(f"{name} {t:6.2f} ({kernels}k{'' if err < 0.05 else f' ERR {err:.3f}'})")
        except Exception as ex:  # a variant a pass refuses
            line.append(f"{name} -- {str(ex).splitlines()[0][:60]}")
    print("\n   ".join(line), flush=True)
