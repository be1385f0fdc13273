from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.loop import indexing
from irforge.dialects.tile.algebra import affine_stores
from irforge.passes.tile.chunk_reduce import identity_init
from irforge.passes.tile.heuristics import heuristic
from irforge.passes.tile.rewrites import substitute

from irforge import index_expr as ix
from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option


class TileSplitReduce(Pass):
    """Split a reduction across blocks (split-K, split-row) and combine the blocks' partial carriers.

    Where a kernel has too few output tiles (or rows) to fill the GPU, the outermost reduction of a point that no
    axis distributes yet (a contraction's K, a long row's) is cut into `splits` contiguous shares: an outer
    `tile.reduce` over the shares distributed over a block axis nothing uses (y, then z), the original reduction
    inside it over one share, and a `tile.combine ... over blockIdx.y` after it, whose result every block of the
    point holds. The combine is materialized with atomics where the value stored is an affine function of it and
    the monoid is `add` on f32 (each block adds its share, the first block the constant part, into an output
    zeroed first), else by a second step (each block stores its partial carrier, a second kernel combines them:
    any monoid, the online one included). A reduction with a non-identity init, or one already split, is left
    alone (idempotent: a reduction distributed over a block axis is a split one).
    """

    name = "tile-split-reduce"
    input_level = "tile"
    anchor = "kernel"
    splits: int = option(
        0,
        domain=Choices((0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)),
        help="blocks sharing one reduction (0: passes/tile/heuristics.py; 1: none)",
    )

    def check(self, op: Operation) -> str | None:
        if not isinstance(op, T.KernelOp) or self.splits <= 1:
            return None
        for r in candidates(op):
            if r.extents[0] % self.splits:
                return f"splits={self.splits} does not divide the reduction's {r.extents[0]} trips"
        return None

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp) or self.splits == 1:
            return
        why = self.check(op)
        if why:
            raise op.error(why)
        for r in candidates(op):
            s = self.splits or heuristic().reduce_splits(op, r)
            if s > 1 and r.extents[0] % s == 0 and r.extents[0] > s:
                comb = split(op, r, s)
                if affine_stores(comb) is not None:  # only atomics materialize a cross-block combine yet
                    unsplit(op, comb)


def candidates(kernel: T.KernelOp) -> list[T.ReduceOp]:
    """Outermost reductions of a point: not distributed or vectorized, not inside another reduction, their inits the
    monoids' identities, in a kernel with a block axis to spare."""
    if _free_block_axis(kernel) is None:
        return []
    out = []
    for r in kernel.walk():
        if not isinstance(r, T.ReduceOp) or r.bind or r.vector > 1:
            continue
        if any(isinstance(a, T.ReduceOp) for a in r.ancestors()):
            continue
        if tuple(r.attributes["init"]) != identity_init(r):
            continue
        out.append(r)
    return out


def _free_block_axis(kernel: T.KernelOp) -> str | None:
    used = T.axes_used_within(kernel)
    return next((a for a in T.BLOCK_AXES[1:] if a not in used and kernel.axis_size(a) == 1), None)


def unsplit(kernel: T.KernelOp, comb: T.CombineOp) -> None:
    """Undo `split`: the share reduction runs all the trips again, in one block."""
    outer = comb.operands[0].owner
    r = outer.body.ops[0]
    axis = comb.over[0]
    substitute(r, {outer.iv: ix.Const(0)}, r)
    r.attributes["extent"] *= kernel.axis_size(axis)
    for old, new in zip(comb.results, r.results):
        old.replace_all_uses_with(new)
    comb.erase()
    r.detach()
    outer.parent.insert_before(outer, r)
    outer.erase()
    kernel.set_axis_size(axis, 1)


def split(kernel: T.KernelOp, r: T.ReduceOp, splits: int) -> T.CombineOp:
    """Cut `r` into `splits` shares over a free block axis; returns the combine that completes them."""
    axis = _free_block_axis(kernel)
    share = r.extents[0] // splits
    types = [res.type for res in r.results]
    hints = [f"{res.name_hint or 'acc'}_share" for res in r.results]
    outer = T.ReduceOp.build(
        splits, r.attributes["monoids"], r.attributes["init"], types, bind=(axis,),
        iv_hint=f"{r.iv.name_hint or 'r'}_s", result_hints=hints, loc=r.loc,
    )  # fmt: skip
    r.parent.insert_before(r, outer)
    r.detach()
    outer.body.append(r)
    outer.body.append(T.YieldOp(list(r.results), ()))
    widths = [len(i) for i in r.attributes["init"]]
    comb = T.CombineOp.build(r.attributes["monoids"], widths, outer.results, (axis,), r.loc,
                             [res.name_hint for res in r.results])  # fmt: skip
    outer.parent.insert_after(outer, comb)
    for old, new in zip(r.results, comb.results):
        for user, i in list(old.uses):
            if user is not outer.body.ops[-1]:
                user.set_operand(i, new)
    r.attributes["extent"] = share
    substitute(r, {r.iv: indexing.ValueDim(outer.iv) * share + indexing.ValueDim(r.iv)}, r)
    kernel.set_axis_size(axis, splits)
    return comb
