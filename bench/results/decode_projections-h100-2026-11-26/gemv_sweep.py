"""Decode projections (bf16, one token) under schedule variants: median us (L2 flushed before each) vs eager."""
import torch

from irforge.compiler import compile
from irforge.runtime.executor import Executor

BASE = open("pipelines/loop-to-tile.pipeline").read()
BASE = ",".join(l.strip().rstrip(",") for l in BASE.splitlines() if l.strip() and not l.startswith("#"))


def pipe(**opts):
    text = BASE
    for p, o in opts.items():
        text = text.replace(p.replace("_", "-"), f"{p.replace('_', '-')}{{{o}}}", 1)
    return f"torch-to-tensor,tensor-to-loop,{text},tile-to-kernel,kernel-to-cuda"


VARIANTS = {"default": pipe()}
for t in (64, 128, 256, 512):
    VARIANTS[f"c{t}"] = pipe(tile_cooperative_reduce=f"threads={t}")
for y in (1, 2, 4):
    VARIANTS[f"y{y}"] = pipe(tile_blockify=f"threads={y}")
for t, y in ((64, 4), (128, 2), (256, 1), (32, 8), (32, 4)):
    VARIANTS[f"c{t}y{y}"] = pipe(tile_cooperative_reduce=f"threads={t}", tile_blockify=f"threads={y}")


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


for k, n in [(2048, 2048), (5632, 2048), (2048, 11264), (2048, 2560)]:
    lin = torch.nn.Linear(k, n, bias=False).to(torch.bfloat16)
    x = torch.randn(1, 1, k, dtype=torch.bfloat16)
    g = lin.cuda()
    xg = x.cuda()
    ref = g(xg)
    e = timed(lambda: g(xg))
    mb = k * n * 2 / 1e6
    line = [f"K{k} N{n} ({mb:.1f} MB): eager {e:6.2f}"]
    for name, p in VARIANTS.items():
        try:
            prog = compile(lin.cpu(), x, pipeline=p)
            exe = Executor(prog.module, params={kk: v.cuda() for kk, v in lin.state_dict().items()})
            out = exe(xg)[0]
            err = (out.float() - ref.float()).abs().max().item()
            t = timed(lambda: exe(xg))
            ks = [(op.attributes["grid"][0], op.attributes["block"]) for op in prog.module.walk() if op.name == "cuda.kernel"]
            line.append(f"{name:8s} {t:6.2f} {mb / t * 1e-0:5.2f}TB/s {ks}{'' if err < 0.1 else f' ERR {err:.3f}'}")
        except Exception as ex:
            line.append(f"{name} -- {str(ex).splitlines()[0][:70]}")
    print("\n   ".join(line), flush=True)
