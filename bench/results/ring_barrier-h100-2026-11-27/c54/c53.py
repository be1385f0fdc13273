"""c53: which part of the f32 TinyLlama decoder layer loses precision on the GPU: each part compiled alone, its
error against a float64 reference beside eager's (on the GPU)."""

import numpy as np
import torch

from irforge.bench.models import TINYLLAMA, decoder_layer, rope_tables
from irforge.compiler import compile as compile_model
from irforge.runner import executor, to_numpy

torch.manual_seed(0)
seq = 128
cos, sin = rope_tables(TINYLLAMA, torch.arange(seq)[None], torch.float32)
step = decoder_layer(TINYLLAMA).float().eval()
L = step.layer
x = torch.randn(1, seq, TINYLLAMA.hidden)
q = torch.randn(1, 32, seq, 64)
kv = torch.randn(1, 4, seq, 64)


class Part(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.layer = L
        self.fn = fn

    def forward(self, *a):
        return self.fn(*a)


qk = torch.randn(1, 4, seq, 64)
parts = {
    "norm_qk": (
        lambda x: torch.cat([L.self_attn.q_proj(L.input_layernorm(x)), L.self_attn.k_proj(L.input_layernorm(x))], -1),
        (x,),
    ),
    "norm_qkv": (
        lambda x: torch.cat(
            [p(L.input_layernorm(x)) for p in (L.self_attn.q_proj, L.self_attn.k_proj, L.self_attn.v_proj)], -1
        ),
        (x,),
    ),
    "layer": (lambda x, c, s: step(x, c, s), (x, cos, sin)),
}
for name, (fn, args) in parts.items():
    m = Part(fn).eval()
    try:
        prog = compile_model(m, *args, ir="cuda")
        out = to_numpy(executor(prog)(*prog.inputs)[0].clone())
        torch.cuda.synchronize()
    except Exception as e:
        print(name, "failed", type(e).__name__, str(e)[:200])
        continue
    with torch.no_grad():
        m64 = Part(fn)
        L.double()
        r = fn(*[a.double() for a in args])
        ref = (r[0] if isinstance(r, tuple) else r).numpy()
        L.float().cuda()
        g = fn(*[a.cuda() for a in args])
        eg = (g[0] if isinstance(g, tuple) else g).float().cpu().numpy()
        L.cpu()
    scale = np.abs(ref).max()
    e1 = np.abs(out.reshape(ref.shape) - ref)
    e2 = np.abs(eg.reshape(ref.shape) - ref)
    kernels = [op.attributes["sym_name"] for op in prog.module.body.ops if op.name == "cuda.kernel"]
    if name == "norm_qkv":
        for j, (a, b) in enumerate([(0, 2048), (2048, 2304), (2304, 2560)]):
            ej = np.abs(out.reshape(ref.shape)[..., a:b] - ref[..., a:b])
            worst = np.unravel_index(ej.argmax(), ej.shape)
            print(f"  part {j}: irforge rel {ej.max() / np.abs(ref[..., a:b]).max():.2e}, worst at {worst}")
        print("  run-to-run:", np.abs(out - to_numpy(executor(prog)(*prog.inputs)[0].clone())).max())
    print(
        f"{name:16s} irforge rel {e1.max() / scale:.2e} mean {e1.mean():.2e}"
        f" | eager rel {e2.max() / scale:.2e} mean {e2.mean():.2e} | {kernels}"
    )
