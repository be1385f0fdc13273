"""The kernel dialect's reference interpreter: a SIMT simulator on numpy, for tiny shapes.

It runs the host function (allocations, views, launches in order) and every launch block by block. Inside a block,
each warp is a Python generator that executes the kernel's ops in lockstep over its lanes (numpy arrays with one
row per lane), with a mask for divergent `kernel.if`s and loops; warps are scheduled until they block (at a
`kernel.barrier` or an `mbarrier_wait`), so producer/consumer kernels run as on the GPU. Barriers, shared memory,
shuffles, vector accesses, cp.async groups, mbarrier phases with transaction bytes, TMA boxes and mma fragments
all follow the hardware's rules, and what the simulator can see going wrong is an error located at the op:

- two threads writing one shared (or global) address with no barrier between them, a thread reading or
  overwriting what another touched since the last barrier, a read of shared memory nothing wrote, a read of an
  async copy's destination before its wait;
- a single-writer guard (`kernel.if {single_writer = [...]}`) whose threads disagree on what it stores;
- a barrier or a shuffle reached by part of a warp, warps waiting at different barriers, a deadlock;
- out-of-bounds or misaligned vector accesses, reads of never-written global memory, outputs left unwritten.

It follows `irforge.interpreter`'s convention: `run(module, inputs, params, entry=, seed=) -> outputs`, numpy arrays
in the order of the host function's results (bf16 values held in float32 arrays, as `irforge.scalar_ops` does).

The package: this module runs the program (the host function, each launch block by block); `block` runs one
block (its warps' generators, the schedule, the dispatch of ops to handlers); `state` holds what the simulator
keeps (buffers, mbarriers, a warp's state); the handlers are by kind in `simple`, `accesses`, `control`,
`async_copies`, `tensor_cores` (mma.sync and warpgroup MMA) and `cluster` (a cluster's blocks run together).
"""

from __future__ import annotations

import numpy as np

from irforge.diagnostics import error
from irforge.ir import Operation

from .. import ops as K
from ..cluster import cluster_dims
from ..types import TensorMapType
from .block import BlockSim
from .cluster import clusters, run_cluster
from .state import GlobalBuffer, TensorMapRef, _hint


def run(module: Operation, inputs=None, params=None, *, entry: str = "forward", seed: int = 0) -> list[np.ndarray]:
    """Run the host function of a kernel-level module (the `irforge.interpreter` convention: inputs as a list or a
    dict by name, missing ones random; params by name, missing ones random from their name and the seed)."""
    from irforge.builtin import ReturnOp
    from irforge.interpreter import bind_inputs, entry_function, param_value

    host = entry_function(module, entry)
    env: dict = {}
    for i, (a, x) in enumerate(zip(host.body.args, bind_inputs(host, inputs, seed))):
        env[a] = GlobalBuffer(a.type.dtype, a.type.numel, x, name=f"input #{i} (%{a.name_hint or i})")
    ret = host.body.ops[-1]
    state = {ret.operands[pos]: (name, arg) for name, arg, pos in host.state_pairs()}
    launches = 0
    for op in host.body.ops:
        if isinstance(op, K.ParamOp):
            t, sym = op.result.type, op.attributes["sym"].name
            env[op.result] = GlobalBuffer(t.dtype, t.numel, param_value(sym, t, params, seed), name=f"param @{sym}")
        elif isinstance(op, K.AllocOp) and op.result in state:  # a state's buffer holds the state on entry
            name, arg = state[op.result]
            env[op.result] = GlobalBuffer(arg.type.dtype, arg.type.numel, env[arg].data, name=f"state '{name}'")
        elif isinstance(op, K.AllocOp):
            env[op.result] = GlobalBuffer(op.result.type.dtype, op.result.type.numel, name="%" + _hint(op.result))
        elif isinstance(op, K.ViewOp):
            env[op.result] = env[op.source]
        elif isinstance(op, K.LaunchOp):
            launches += 1
            _launch(op, [env[v] for v in op.args], launches)
        elif isinstance(op, ReturnOp):
            outs = []
            for v in op.values:
                buf = env[v]
                if not buf.written.all():
                    missing = int((~buf.written).sum())
                    raise error(f"result {buf.name} has {missing} element(s) no kernel wrote", op.loc)
                outs.append(buf.data.reshape(v.type.shape).copy())
            return outs
        else:
            raise op.error("is not a host op the kernel simulator knows")
    raise error("the host function has no func.return", host.loc)


def _launch(op: K.LaunchOp, buffers: list[GlobalBuffer], launch_id: int) -> None:
    kernel = op.callee_op()
    params = kernel.attributes["function_type"].inputs
    bound = []
    for buf, t in zip(buffers, params):
        bound.append(TensorMapRef(buf, t) if isinstance(t, TensorMapType) else buf)
    gx, gy, gz = kernel.attributes["grid"]
    agreement: dict = {}  # what the single-writer guards saw, across the launch's blocks
    # the same in every block: (access, type) -> _access_layout, (op, index group) -> its indices as functions
    layouts: dict = {}
    with np.errstate(all="ignore"):  # index arithmetic wraps like the GPU's; bounds are checked, not warned about
        for blocks in clusters((gx, gy, gz), cluster_dims(kernel)):
            sims = [BlockSim(kernel, b, bound, launch_id, agreement, layouts) for b in blocks]
            if len(sims) == 1:
                sims[0].run()
            else:
                run_cluster(sims)
