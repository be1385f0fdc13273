from __future__ import annotations

from irforge.dialects import tile as T
from irforge.passes.tile.chunk_reduce import identity_init
from irforge.passes.tile.heuristics import THREAD_CHOICES, heuristic

from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option
from irforge.target import target


class TileCooperativeReduce(Pass):
    """Share each long reduction among a block's threads: a thread-strided loop, then a cross-thread combine.

    A `tile.reduce` that no thread axis distributes yet, in a place where all of a block's threads stand at the
    same point (no enclosing loop is on threads), gets `by threadIdx.x`: each thread folds every `threads`-th
    element into a partial carrier, and a `tile.combine ... over threadIdx.x` right after it folds the partials
    (warp shuffles, then shared memory across warps, when materialized) and gives every thread the result. Works
    for every monoid, the online-softmax carrier included. The kernel gets `threads` threads along x if it had
    one; a kernel that already has several keeps them (the pass never resizes what another decision sized).
    Reductions already on threads are left alone, so the pass is idempotent, and so is one whose init is not its
    monoid's identity (every thread would fold it in).
    """

    name = "tile-cooperative-reduce"
    input_level = "tile"
    anchor = "kernel"
    threads: int = option(
        0,
        domain=Choices(THREAD_CHOICES),
        help="threads along threadIdx.x sharing one reduction (0: from the reduction's length, by "
        "passes/tile/heuristics.py; 1: reductions stay in one thread)",
    )

    def check(self, op: Operation) -> str | None:
        if not isinstance(op, T.KernelOp) or self.threads <= 1 or not candidates(op):
            return None
        bx = op.axis_size("threadIdx.x")
        if bx > 1 and bx != self.threads:
            return (
                f"threads={self.threads}, but the kernel already has {bx} threads along threadIdx.x (a reduction "
                "shares them)"
            )
        if op.threads * self.threads > target().max_threads:
            n = op.threads * self.threads
            return f"threads={self.threads} would give the block {n} threads (the limit is {target().max_threads})"
        return None

    def _why_one(self) -> str:
        return "threads=1" if self.threads else "the default schedule's choice"

    def run(self, op: Operation) -> None:
        for r in candidates(op):
            if "threadIdx.x" in T.bound_axes(r):
                continue  # inside a reduction shared just now
            n = op.axis_size("threadIdx.x")
            if n == 1:
                n = self.threads or heuristic().cooperative_threads(op, r)
                if n == 1:
                    self.remark(
                        r, f"the reduction over {r.extents[0]} elements stays in one thread ({self._why_one()})"
                    )
                    continue
                if op.threads * n > target().max_threads:
                    self.remark(
                        r,
                        f"not shared: {n} threads would give the block {op.threads * n} (the limit is "
                        f"{target().max_threads})",
                    )
                    continue
                op.set_axis_size("threadIdx.x", n)
            share(r)
            self.remark(r, f"the reduction over {r.extents[0]} elements is shared by {n} threads along threadIdx.x")


def candidates(kernel: T.KernelOp) -> list[T.ReduceOp]:
    """Reductions that may be shared along threadIdx.x: not distributed yet, all of the block's threads at their
    point (no enclosing loop on threads), no loop inside on threadIdx.x, their inits the monoids' identities (every
    thread starts from the init: another would be folded in once per thread)."""
    out = []
    for r in kernel.walk():
        if not isinstance(r, T.ReduceOp) or r.bind:
            continue
        if any(a in T.THREAD_AXES for a in T.bound_axes(r)) or "threadIdx.x" in T.axes_used_within(r):
            continue
        if tuple(r.attributes["init"]) != identity_init(r):
            continue
        out.append(r)
    return out


def share(r: T.ReduceOp) -> T.CombineOp:
    """Distribute `r` over threadIdx.x and complete its partial carriers with a combine right after it."""
    r.attributes["bind"] = ("threadIdx.x",)
    hints = [res.name_hint for res in r.results]
    widths = [len(init) for init in r.attributes["init"]]
    comb = T.CombineOp.build(r.attributes["monoids"], widths, r.results, ("threadIdx.x",), r.loc, hints)
    for res, new in zip(r.results, comb.results):
        for user, i in list(res.uses):
            user.set_operand(i, new)
        res.name_hint = f"{res.name_hint or 'acc'}_part"
    comb.set_operands(r.results)
    r.parent.insert_after(r, comb)
    return comb
