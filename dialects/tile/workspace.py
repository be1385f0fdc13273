"""Shared memory a kernel needs beyond its stages: the workspace of its combines among warps (a reduction sliced
over threadIdx.y by `tile-split-reduce across=warps`), which the budgets of the passes that size stages and rings
count before the lowering allocates it."""

from __future__ import annotations

import math

from . import THREAD_AXES, CombineOp, ForOp, KernelOp, enclosing_loops
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
