"""Does a CUDA graph captured from irforge's dependent launches keep programmatic edges?"""

import torch
from cuda.bindings import driver as cu

from irforge.compiler import compile
from irforge.runtime.executor import Executor

m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.SiLU(), torch.nn.Linear(512, 256), torch.nn.LayerNorm(256))
x = torch.randn(4, 256)
prog = compile(m, x, ir="cuda")
params = {k: v.cuda() for k, v in m.state_dict().items()}
exe = Executor(prog.module, params=params)
print(
    "kernels:",
    [
        (op.attributes["sym_name"], op.attributes.get("dependent_launch"))
        for op in prog.module.walk()
        if op.name == "cuda.kernel"
    ],
)
out = exe(x.cuda())[0]
print("max err", (out.cpu() - m(x)).abs().max().item())
exe._bind([x.cuda()])
torch.cuda.synchronize()
for keep in (True,):
    try:
        g = torch.cuda.CUDAGraph(keep_graph=keep)
    except TypeError:
        g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        exe._launch_all(capturing=True)
    raw = g.raw_cuda_graph()
    h = cu.CUgraph(raw)
    err, frm, to, data, n = cu.cuGraphGetEdges(h, 0)
    print("edges:", err, n)
    err, frm, to, data, n = cu.cuGraphGetEdges(h, n)
    print(err, [(d.type, d.from_port, d.to_port) for d in data] if data else data)
