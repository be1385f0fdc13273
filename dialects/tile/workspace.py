"""Shared memory a kernel needs beyond its stages: the workspace of its combines among warps (a reduction sliced
over threadIdx.y by `tile-split-reduce across=warps`) and through a cluster (`via=cluster`: each block keeps every
block's carriers), which the budgets of the passes that size stages and rings count before the lowering allocates
it."""

from __future__ import annotations

import math

from . import BLOCK_AXES, THREAD_AXES, CombineOp, ForOp, KernelOp, enclosing_loops
from .columns import varies


def warp_workspace_bytes(kernel: KernelOp) -> int:
    """Shared memory the kernel's combines over threadIdx.y take once materialized: a slot per thread for each
    carrier component's register tile (its thread loops' widths along the indices it varies with)."""
    total = 0
    for c in kernel.walk():
        if not isinstance(c, CombineOp) or c.over != ("threadIdx.y",):
            continue
        loops = [lp for lp in enclosing_loops(c) if isinstance(lp, ForOp) and set(lp.bind) & set(THREAD_AXES)]
        for v in c.operands:
            n = math.prod(w for lp in loops for iv, w in zip(lp.ivs, lp.vector_shape) if varies(v, iv, set()))
            total += n * v.type.bytes * kernel.threads
    return total


def workspace_bytes(kernel: KernelOp) -> int:
    """Shared memory the kernel's combines take once materialized: among warps and through clusters."""
    return warp_workspace_bytes(kernel) + sum(
        cluster_carrier_bytes(kernel, c) for c in kernel.walk() if isinstance(c, CombineOp) and via_cluster(c)
    )


def cluster_carrier_bytes(kernel: KernelOp, comb: CombineOp) -> int:
    """The carriers of a combine through a cluster in each of its blocks: every block's, a slot per thread for
    each component (32-bit) of the thread's work items (`passes/tile_to_kernel/clusters.py`)."""
    per_thread = math.prod(lp.vector for lp in enclosing_loops(comb))
    return kernel.axis_size(comb.over[0]) * kernel.threads * per_thread * len(comb.operands) * 4


def via_cluster(comb: CombineOp) -> bool:
    """Whether a combine over a block axis is materialized through a cluster: only where a split asked for it
    (`tile-split-reduce via=cluster`; the rule is `passes/tile_to_kernel/clusters.py`)."""
    return len(comb.over) == 1 and comb.over[0] in BLOCK_AXES and comb.attributes.get("via") == "cluster"
