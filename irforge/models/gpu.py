"""A compiled model on the GPU: each step linked into one cuda.program, run by the runtime's executor; the decode
step replayed as a CUDA graph; the KV cache one set of state tensors both steps update in place.

    runner = OnGPU(model, params)                     # params: the model's weights as CUDA tensors, by name
    tokens = greedy(runner, prompt, 32)               # irforge.models.generate.greedy
"""

from __future__ import annotations

import numpy as np

from irforge.builtin import ModuleOp
from irforge.dialects.cuda import ops as C
from irforge.ir import Block, Operation, Region

from .program import ModelStep


def link(step: ModelStep) -> Operation:
    """One cuda-level module for a cuda-level step: each segment's kernels once, and a program launching every
    instance's kernels on its own params and state. A segment's intermediates are allocated once and reused by
    its instances (they run one after another); the buffers an instance hands on are its own."""
    module = ModuleOp()
    block = Block()
    env: dict = {}
    for i, (name, t) in enumerate(step.inputs):
        env[name] = block.append(C.InputOp((), [t], {"position": i}, result_hints=[name])).result
    named: dict = {}  # ("param" | "state", model name) -> value
    shared: dict = {}  # (segment, alloc) -> value
    for seg in step.segments.values():
        for op in seg.module.body.ops:
            if isinstance(op, C.CudaKernelOp):
                module.body.append(op.clone())
    for inst in step.instances:
        prog = next(op for op in step.segments[inst.segment].module.body.ops if isinstance(op, C.ProgramOp))
        handed_on = _output_allocs(prog)
        vm: dict = {}
        for op in prog.body.ops:
            if isinstance(op, C.InputOp):
                vm[op.result] = env[inst.inputs[op.attributes["position"]]]
            elif isinstance(op, (C.ParamOp, C.StateOp)):
                name = inst.symbols.get(op.attributes["sym"].name, op.attributes["sym"].name)
                key = (op.name, name)
                if key not in named:
                    attrs = {"sym": type(op.attributes["sym"])(name)}
                    named[key] = block.append(type(op)((), [op.result.type], attrs, result_hints=[name])).result
                vm[op.result] = named[key]
            elif isinstance(op, C.AllocOp) and op.result not in handed_on:
                key = (inst.segment, op.result)
                if key not in shared:
                    shared[key] = block.append(op.clone()).result
                vm[op.result] = shared[key]
            elif isinstance(op, C.OutputOp):
                for k, v in zip(inst.outputs, op.values):
                    env[k] = vm[v]
            else:
                block.append(op.clone(vm))
    block.append(C.OutputOp([env[k] for k in step.outputs], ()))
    module.body.append(C.ProgramOp((), (), {"sym_name": step.name}, [Region([block])]))
    return module


def _output_allocs(prog) -> set:
    """The allocations a program's outputs live in (through views)."""
    out = next(op for op in prog.body.ops if isinstance(op, C.OutputOp))
    found = set()
    for v in out.values:
        while isinstance(getattr(v, "op", None), C.ViewOp):
            v = v.op.source
        found.add(v)
    return found


class OnGPU:
    """The model's steps as executors sharing their state; the decode step a CUDA graph (`graph=True`)."""

    def __init__(self, model, params: dict, *, graph: bool = True):
        import torch

        from irforge.runtime import Executor

        self.torch = torch
        self.max_len = model.max_len
        self.executors = {}
        for name, step in model.steps.items():
            ex = Executor(link(step), use_graph=graph and name == "decode")
            ex.set_params({k: v for k, v in params.items() if k in ex.param_types})
            self.executors[name] = ex
        first = next(iter(self.executors.values()))
        for ex in self.executors.values():
            ex.set_state(first.state)

    def reset(self) -> None:
        """An empty cache (zeros), as at the start."""
        for t in next(iter(self.executors.values())).state.values():
            t.zero_()

    def __call__(self, step: str, input_ids, cache_position):
        from irforge.diagnostics import error

        if int(np.max(cache_position)) >= self.max_len:
            raise error(f"position {int(np.max(cache_position))} is past the cache's {self.max_len} tokens")
        torch = self.torch
        dev = torch.device("cuda")
        ids = torch.as_tensor(input_ids, dtype=torch.long, device=dev)
        pos = torch.as_tensor(cache_position, dtype=torch.long, device=dev)
        (logits,) = self.executors[step](ids, pos)
        return logits[:, -1].float()
