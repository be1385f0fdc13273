"""c52: the f32 TinyLlama decoder layer's error on the GPU against a float64 reference, beside eager's; NVRTC's log."""

import numpy as np
import torch

from irforge.bench.models import TINYLLAMA, decoder_layer, rope_tables
from irforge.compiler import compile as compile_model
from irforge.runner import executor, to_numpy
from irforge.runtime import nvrtc

torch.manual_seed(0)
seq = 128
t = torch.float32
cos, sin = rope_tables(TINYLLAMA, torch.arange(seq)[None], t)
layer = decoder_layer(TINYLLAMA).to(t).eval()
x = torch.randn(1, seq, TINYLLAMA.hidden, dtype=t)
prog = compile_model(layer, x, cos, sin, ir="cuda")
out = to_numpy(executor(prog)(*prog.inputs)[0].clone())
torch.cuda.synchronize()
with torch.no_grad():
    ref64 = layer.double()(x.double(), cos.double(), sin.double())
    ref64 = (ref64[0] if isinstance(ref64, tuple) else ref64).numpy()
    layer32 = layer.float().cuda()
    e = layer32(x.cuda(), cos.cuda(), sin.cuda())
    eager_gpu = (e[0] if isinstance(e, tuple) else e).float().cpu().numpy()
    layer_cpu = layer.float().cpu()
    c = layer_cpu(x, cos, sin)
    eager_cpu = (c[0] if isinstance(c, tuple) else c).numpy()
scale = np.abs(ref64).max()
for name, o in [
    ("irforge gpu", out),
    ("eager gpu", eager_gpu),
    ("eager cpu", eager_cpu),
    ("prog.expected", np.asarray(prog.expected[0])),
]:
    o = np.asarray(o, dtype=np.float64).reshape(ref64.shape)
    err = np.abs(o - ref64)
    print(f"{name:14s} vs f64: max abs {err.max():.3e}  rel {err.max() / scale:.3e}  mean abs {err.mean():.3e}")
print("irforge vs eager gpu rel", np.abs(out.reshape(ref64.shape) - eager_gpu).max() / scale)
print("irforge vs eager cpu rel", np.abs(out.reshape(ref64.shape) - eager_cpu).max() / scale)


src = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] += 1.0f; }'
cub = nvrtc.compile_cuda(src, "k", arch="sm_90a", use_cache=False)
print("nvrtc version", nvrtc._nvrtc().nvrtcVersion(), "log:", repr(cub.log[:400]))
print("usage", nvrtc.parse_resource_usage(cub.log))
