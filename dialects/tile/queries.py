"""Queries the tile passes share: the loop around an op whose trips differ between a block's threads, the axes
used within an op, index expressions as linear terms, and the grid that fits a kernel's loops."""

from __future__ import annotations

import math

from irforge.ir import Operation
from irforge.target import target

from ..loop.indexing import enclosing_loops
from .combines import CombineOp
from .loops import LoopOp, ReduceOp
from .program import BLOCK_AXES, THREAD_AXES, KernelOp


def uneven_loop(kernel: KernelOp, op: Operation) -> LoopOp | None:
    """The first loop around `op` distributed over threads whose trips differ between a block's threads (a barrier
    at `op` would not be reached by all of them), or None."""
    return next(
        (lp for lp in enclosing_loops(op) if set(lp.bind) & set(THREAD_AXES) and not lp.block_uniform(kernel)), None
    )


def axes_used_within(op: Operation) -> set[str]:
    """Hardware axes the loops and combines inside `op` (and `op` itself) distribute or combine over."""
    out = set()
    for inner in op.walk():
        if isinstance(inner, LoopOp):
            out.update(inner.bind)
        elif isinstance(inner, CombineOp):
            out.update(inner.over)
    return out


def linear_terms(e) -> list[tuple]:
    """An index expression as a sum of (atom, coefficient): atoms are values and non-linear parts (floordiv, mod,
    min, max); the constant term is (Const(1), c)."""
    from irforge import index_expr as ix

    if isinstance(e, ix.Const):
        return [(ix.Const(1), e.value)]
    if isinstance(e, (ix.Add, ix.Sub)):
        sign = 1 if isinstance(e, ix.Add) else -1
        return linear_terms(e.lhs) + [(a, sign * k) for a, k in linear_terms(e.rhs)]
    if isinstance(e, ix.Mul) and isinstance(e.rhs, ix.Const):
        return [(a, k * e.rhs.value) for a, k in linear_terms(e.lhs)]
    if isinstance(e, ix.Mul) and isinstance(e.lhs, ix.Const):
        return [(a, k * e.lhs.value) for a, k in linear_terms(e.rhs)]
    return [(e, 1)]


def fit_grid(kernel: KernelOp) -> None:
    """Size the grid so that every loop distributed over a block axis gets one unit per work item (fewer where
    CUDA's limits say so: the loops are then strided). Axes no loop is distributed over get one block. An axis a
    reduction is split over and combined through a cluster has one block per share (the cluster is those
    blocks): the loops after the split that share it stride over them."""
    need = dict.fromkeys(BLOCK_AXES, 1)
    shares: dict[str, int] = {}
    for lp in kernel.walk():
        if isinstance(lp, LoopOp):
            for a in lp.bind:
                if a in need:
                    others = math.prod(kernel.axis_size(b) for b in lp.bind if b != a)
                    need[a] = max(need[a], -(-lp.work_items // others))
                    if isinstance(lp, ReduceOp) and _combined_in_cluster(lp):
                        shares[a] = max(shares.get(a, 1), need[a])
    need.update(shares)
    for a, n in need.items():
        kernel.set_axis_size(a, min(n, target().max_grid[BLOCK_AXES.index(a)]))


def _combined_in_cluster(r: ReduceOp) -> bool:
    return any(isinstance(u, CombineOp) and u.attributes.get("via") == "cluster" for v in r.results for u in v.users)
