"""Last-block fold: the joined kernels give eager's answer, and the same bits on every call (the arrival counter
back at zero after each launch), launched one by one and replayed as a CUDA graph."""

import sys

import torch

from irforge.bench.case import suite
from irforge.compiler import compile as irc
from irforge.compiler import params_in_use
from irforge.runtime.executor import Executor

for cid in sys.argv[1:]:
    case = next(c for c in suite("llm") if c.id == cid)
    model = case.program("cuda")
    inputs = case.make_inputs("cuda")
    with torch.no_grad():
        ref = model(*inputs)
    prog = irc(model, *[i.cpu() for i in inputs], ir="cuda")
    names = [k.attributes["sym_name"] for k in prog.module.walk() if k.name == "cuda.kernel"]
    arrive = sum("irf_arrive(" in k.attributes["source"] for k in prog.module.walk() if k.name == "cuda.kernel")
    for graph in (False, True):
        ex = Executor(prog.module, params=params_in_use(prog.module, prog.params), use_graph=graph)
        first = ex(*inputs)[0].clone()
        same = True
        for _ in range(200):
            same &= bool(torch.equal(ex(*inputs)[0], first))
        torch.cuda.synchronize()
        r = ref if isinstance(ref, torch.Tensor) else ref[0]
        err = float((first.double() - r.double()).norm() / r.double().norm())
        line = f"{cid} graph={graph} kernels={names} arrivals={arrive} rel_err={err:.2e}"
        print(f"{line} same_bits_200_calls={same}", flush=True)
