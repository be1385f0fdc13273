"""Threads that differ only in their columns: a loop on thread axes that deals one work item per unit, `axis`
last, its last work-grid dimension exactly over `axis`, gives the threads along `axis` the same point of every
other dimension (an attention row's lanes, each holding a slice of the row's columns). What they compute without
reading the column they can share (a reduction distributed over `axis` again, a combine over it), and a store whose
place and value do not depend on the column one of them makes for all (docs/dialects/tile.md, "Attention")."""

from __future__ import annotations

from irforge.ir import Operation, OpResult, Value

from . import CombineOp, LoopOp, ReduceOp, StoreOp, enclosing_loops, kernel_of
from .vectors import read_components


def column_loop(op: Operation, axis: str) -> LoopOp | None:
    """The loop around `op` distributed over `axis` when it deals `axis` by column (above), else None."""
    outer = next((lp for lp in enclosing_loops(op) if axis in lp.bind), None)
    if outer is None or not outer.extents:
        return None
    kernel = kernel_of(op)
    dealt = (
        outer.bind[-1] == axis
        and outer.work_items == outer.units(kernel)
        and outer.layout.work_grid[-1] == kernel.axis_size(axis)
        and outer.layout.raster == 1  # a raster deals consecutive units down the rows too
    )
    return outer if dealt else None


def shared_by_column(op: Operation, axis: str) -> bool:
    """Whether the threads along `axis`, which a loop around `op` deals by column, stand at the same point of what
    `op` does: a loop's body, a combine's values, a store's place and value read nothing that varies along the
    column."""
    outer = column_loop(op, axis)
    if outer is None:
        return False
    column = outer.ivs[-1]
    if isinstance(op, (CombineOp, StoreOp)):
        reads = list(op.operands)
    else:
        reads = [v for inner in op.walk() for v in inner.operands if not _inside(v, op)]
    return not any(varies(v, column, set()) for v in reads)


def varies(v: Value, iv: Value, seen: set) -> bool:
    """Whether `v` depends on the loop index `iv` (a reduction's component through what its combine reads)."""
    if v is iv:
        return True
    if not isinstance(v, OpResult) or id(v) in seen:
        return False
    seen.add(id(v))
    op = v.op
    if isinstance(op, ReduceOp):
        widths = [len(r) for _, _, r in op.carriers]
        return any(varies(x, iv, seen) for x in read_components(op.carriers, widths, op.yielded, v.index))
    return any(varies(x, iv, seen) for x in op.operands) or any(
        varies(y, iv, seen) for r in op.regions for b in r.blocks for o in b.ops for y in o.operands
    )


def _inside(v: Value, op: Operation) -> bool:
    owner = v.op if isinstance(v, OpResult) else v.block.parent_op
    return owner is op or op.is_ancestor_of(owner)


def writer_axes(store: StoreOp) -> set[str]:
    """The hardware axes the loops around a store distribute its elements over: every axis they are bound to, less
    one dealt by column when the store does not depend on the column (its threads store one element: one stores
    for all, by the single-writer rule)."""
    axes = {a for lp in enclosing_loops(store) for a in lp.bind}
    return {a for a in axes if not shared_by_column(store, a)}
