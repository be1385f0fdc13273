from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.tile import vectors
from irforge.dialects.tile.algebra import contractions_in
from irforge.passes.tile.cooperative_reduce import share
from irforge.passes.tile.heuristics import TILE_CHOICES, heuristic

from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option


class TileRegisterTile(Pass):
    """Give each thread a register tile of a contraction's outputs: `tm` x `tn` points a work item.

    A loop distributed over thread axes whose points are a contraction's outputs (its M and N dimensions: the
    innermost of its dimensions each factor alone reaches) takes `vector` widths `tm` and `tn` along them.
    Materialized, the accumulator is a `tm x tn` register tile, and each step of the reduction loads a `tm` column
    of A and a `tn` row of B and multiplies them into it (an outer product: tm * tn fused multiply-adds for tm + tn
    loads). A loop already vectorized is left alone (idempotent). The loop keeps its threads: the pass declines
    where the tile would leave a loop holding a stage or combine with threads that have nothing to do.

    When the threads along x then differ only in their columns (x the loop's last axis, its last dimension N dealt
    whole to them, a work item a thread: the lanes of an attention row, `tile-blockify`'s `lanes`), the reduction
    computing the contraction's A factor in the element (the row's scores, which read no column) is shared by them:
    distributed over threadIdx.x, a slice each, and combined over threadIdx.x.
    """

    name = "tile-register-tile"
    input_level = "tile"
    anchor = "kernel"
    tm: int = option(0, domain=Choices(TILE_CHOICES[:6]), help="rows (M) per thread (0: heuristic; 1: none)")
    tn: int = option(0, domain=Choices(TILE_CHOICES[:6]), help="columns (N) per thread (0: heuristic; 1: none)")

    def check(self, op: Operation) -> str | None:
        if not isinstance(op, T.KernelOp):
            return None
        for loop, m_dim, n_dim in candidates(op):
            for name, size, d in (("tm", self.tm, m_dim), ("tn", self.tn, n_dim)):
                if size > 1 and loop.extents[d] % size:
                    return f"{name}={size} does not divide the {loop.extents[d]} outputs of a block along it"
        return None

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp):
            return
        why = self.check(op)
        if why:
            raise op.error(why)
        for loop, m_dim, n_dim in candidates(op):
            tm, tn = heuristic().register_tile(op, loop, m_dim, n_dim)
            widths = [1] * len(loop.extents)
            widths[m_dim], widths[n_dim] = self.tm or tm, self.tn or tn
            if any(w > 1 for w in widths) and not vectors.why_not(loop, tuple(widths)):
                old = loop.vector_shape
                loop.set_vector(widths)
                collective = any(isinstance(x, (T.StageOp, T.CombineOp)) for x in loop.walk())
                if collective and loop.work_items % loop.units(op):
                    loop.set_vector(old)  # some threads would miss the block's stages
            if shares_rows(op, loop, n_dim):
                if loop.vector_shape[m_dim] == 1:
                    self._share_scores(op, loop)
                else:  # the shuffles would combine a register tile of rows, which lower-to-kernel does not
                    self.remark(
                        loop, f"scores not shared by the row's threads: a thread holds {loop.vector_shape[m_dim]} rows"
                    )

    def _share_scores(self, kernel: T.KernelOp, loop: T.ForOp) -> None:
        for c in contractions_in(loop):
            if c.a_reduction is not None and not c.a_reduction.bind:
                share(c.a_reduction)
                lanes = kernel.axis_size("threadIdx.x")
                self.remark(c.a_reduction, f"shared by the row's {lanes} threads along x (a slice each, a shuffle)")


def shares_rows(kernel: T.KernelOp, loop: T.ForOp, n_dim: int) -> bool:
    """Whether the threads along x of `loop` differ only in their columns (N): x is its last axis, its last
    dimension is N and is dealt whole to the x threads, one work item a thread. What those threads compute that
    does not depend on N (a reduction computing the contraction's A factor) they can then share."""
    x = kernel.axis_size("threadIdx.x")
    return (
        x > 1
        and loop.bind[-1:] == ("threadIdx.x",)
        and n_dim == len(loop.extents) - 1
        and loop.layout.work_grid[-1] == x
        and loop.work_items == loop.units(kernel)
    )


def candidates(kernel: T.KernelOp) -> list[tuple[T.ForOp, int, int]]:
    """(loop, M dimension, N dimension): loops on thread axes, not vectorized, whose points a contraction's
    outputs are."""
    out = []
    for loop in kernel.walk():
        if not isinstance(loop, T.ForOp) or loop.vector > 1 or not any(a in T.THREAD_AXES for a in loop.bind):
            continue
        for c in contractions_in(loop):
            m = [d for d, iv in enumerate(loop.ivs) if iv in c.m]
            n = [d for d, iv in enumerate(loop.ivs) if iv in c.n]
            if m and n:
                out.append((loop, m[-1], n[-1]))
                break
    return out
