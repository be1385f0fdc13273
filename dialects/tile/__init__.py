"""The `tile` dialect: the GPU schedule of each kernel (docs/dialects/tile.md).

    func.func @forward(%x: f32[1,32,2048]) -> f32[1,32,2048] {
      %w = tile.param @rms_norm.weight : f32[2048]
      %y = tile.buffer f32[1,32,2048]
      tile.kernel @k_rms_norm grid(32) block(256) {
        tile.for %a1 in 0..32 by blockIdx.x {                          // block b takes row b
          %x_smem = tile.stage %x[0, %a1, 0] -> smem : f32[1,1,2048]    // the row, copied once into shared memory
          %part = tile.reduce %r2 in 0..2048 by threadIdx.x vector 4 add(0.0) -> f32 {   // thread-strided
            %v = tile.load %x_smem[0, 0, %r2]
            %sq = scalar.mul %v, %v : f32
            tile.yield %sq
          }
          %sum = tile.combine add(%part) over threadIdx.x : f32          // warp shuffles + shared-memory tree
          ...
          tile.for %a2 in 0..2048 by threadIdx.x vector 4 { ... tile.store %y[0, %a1, %a2] = %o }
        }
      }
      func.return %y
    }

The program structure is the loop level's (a function of kernels that read and write buffers in order); what this
level adds is *where* each loop runs. Every thread of every block runs the kernel body, as in CUDA; a loop may be
distributed `by` hardware axes (`blockIdx.x|y|z`, `threadIdx.x|y|z`): its iteration space, in work items of `vector`
consecutive iterations along the innermost dimension, is dealt round-robin to the units those axes number (unit `u`
runs work items `u, u + P, u + 2P, ...`, P the product of the axes' launch sizes), so any launch size stays correct.
A loop without `by` runs whole in every thread that reaches it. `tile.combine` folds the reduction carriers of the
threads that differ only along its axes (every one of them receives the result); `tile.stage` copies a box of a
buffer into the block's shared memory. A store happens once per point: in the thread whose index is 0 along every
launch axis (of size > 1) that no enclosing loop is distributed over.

The reference interpreter (`interpreter.py`) executes exactly these semantics on numpy.

The ops live in modules by kind: `program` (kernels, buffers and params, stages, loads, stores, indices), `loops`
(`tile.for`, `tile.reduce`, `tile.yield`), `combines`; `queries` has what passes ask of them, `syntax` the custom
syntax's parse callbacks.
"""

from __future__ import annotations

from irforge.dialect import Dialect, grammar_file

from ..loop.indexing import enclosing_loops, kernel_of
from .combines import COMBINE_VIAS, CombineOp
from .loops import SCHEDULE_ATTRIBUTES, ForOp, LoopOp, ReduceOp, YieldOp, bound_axes, carriers_of
from .program import (
    AXES,
    BLOCK_AXES,
    STAGE_ATTRIBUTES,
    STAGE_COPIES,
    THREAD_AXES,
    BufferOp,
    IndexOp,
    KernelOp,
    LoadOp,
    ParamOp,
    StageOp,
    StoreOp,
)
from .queries import axes_used_within, fit_grid, linear_terms, uneven_loop
from .syntax import TileSyntax

__all__ = [
    "AXES",
    "BLOCK_AXES",
    "COMBINE_VIAS",
    "SCHEDULE_ATTRIBUTES",
    "STAGE_ATTRIBUTES",
    "STAGE_COPIES",
    "THREAD_AXES",
    "BufferOp",
    "CombineOp",
    "ForOp",
    "IndexOp",
    "KernelOp",
    "LoadOp",
    "LoopOp",
    "ParamOp",
    "ReduceOp",
    "StageOp",
    "StoreOp",
    "TileSyntax",
    "YieldOp",
    "axes_used_within",
    "bound_axes",
    "carriers_of",
    "dialect",
    "enclosing_loops",
    "fit_grid",
    "kernel_of",
    "linear_terms",
    "uneven_loop",
]

dialect = Dialect(
    name="tile",
    summary="the GPU schedule: loops distributed over blocks and threads, combines, shared-memory stages",
    ops=(KernelOp, BufferOp, ParamOp, ForOp, ReduceOp, YieldOp, CombineOp, StageOp, LoadOp, StoreOp, IndexOp),
    level="tile",
    grammar=grammar_file(__name__, "tile.lark"),
    syntax=TileSyntax,
    interpreter="irforge.dialects.tile.interpreter:interpret",
)
