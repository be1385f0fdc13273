from __future__ import annotations

from irforge.dialects import tile as T
from irforge.passes.tile.heuristics import THREAD_CHOICES, heuristic

from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option
from irforge.target import target


class TileBlockify(Pass):
    """Split parallel loops into blocks x threads.

    Two moves, both recognised as done from the IR (a loop already on a thread axis is left alone):

    - a free loop inside a block's point (under a band, or a loop that shares a reduction) goes on threadIdx.x
      when the block already has threads there that no enclosing loop uses: the threads take its iterations in
      turn (the write-back loop after a cooperative reduction);
    - a band (a loop on block axes only) is split over one more thread axis, `threads` of them: the first of x, y,
      z that neither an enclosing loop nor anything inside it uses (y under a cooperative reduction on x: several
      rows per block). The grid shrinks to match. A band holding a `tile.stage` keeps its point per block.

    `threads` is the block size along the new axis; 0 asks passes/tile/heuristics.py, 1 leaves bands alone.
    """

    name = "tile-blockify"
    input_level = "tile"
    anchor = "kernel"
    threads: int = option(
        0,
        domain=Choices(THREAD_CHOICES),
        help="threads per block along the axis a band is split over (0: from the band's shape, by "
        "passes/tile/heuristics.py; 1: bands stay one point per block)",
    )

    def check(self, op: Operation) -> str | None:
        if not isinstance(op, T.KernelOp) or self.threads <= 1:
            return None
        for band, axis in _band_splits(op, _inner_free_loops(op)):
            size = op.axis_size(axis)
            if size == 1 and op.threads * self.threads > target().max_threads:
                n = op.threads * self.threads
                return f"threads={self.threads} would give the block {n} threads (the limit is {target().max_threads})"
            n = self.threads if size == 1 else size
            if axis != "threadIdx.x" and _holds_collectives(band) and band.work_items % n:
                return (
                    f"threads={self.threads} does not divide the band's {band.work_items} points; the combines inside "
                    "need every row of the block busy on every trip"
                )
        return None

    def _why_one(self) -> str:
        return "threads=1" if self.threads else "the default schedule's choice"

    def run(self, op: Operation) -> None:
        inner = _inner_free_loops(op)
        splits = _band_splits(op, inner)
        for loop in inner:
            loop.attributes["bind"] = ("threadIdx.x",)
            self.remark(loop, f"the block's {op.axis_size('threadIdx.x')} threads along x take the loop's iterations")
        for band, axis in splits:
            size = op.axis_size(axis)
            if size == 1:
                size = self.threads or heuristic().band_threads(op, band, axis)
                if size == 1:
                    self.remark(
                        band, f"the band of {band.work_items} points stays one point per block ({self._why_one()})"
                    )
                    continue
                if op.threads * size > target().max_threads:
                    self.remark(
                        band,
                        f"not split: {size} threads would give the block {op.threads * size} (the limit is "
                        f"{target().max_threads})",
                    )
                    continue
                op.set_axis_size(axis, size)
            band.attributes["bind"] = (*band.bind, axis)
            self.remark(band, f"the band of {band.work_items} points is split over {size} threads along {axis}")
        T.fit_grid(op)


def _is_band(loop) -> bool:
    return isinstance(loop, T.ForOp) and bool(loop.bind) and all(a in T.BLOCK_AXES for a in loop.bind)


def _inner_free_loops(kernel: T.KernelOp) -> list[T.ForOp]:
    """The outermost free loops not distributed yet, where threadIdx.x has threads (several) that nothing around
    or inside them uses."""
    out: list[T.ForOp] = []
    if kernel.axis_size("threadIdx.x") == 1:
        return out
    for loop in kernel.walk():
        if not isinstance(loop, T.ForOp) or loop.bind or any(o.is_ancestor_of(loop) for o in out):
            continue
        if "threadIdx.x" not in T.bound_axes(loop) | T.axes_used_within(loop):
            out.append(loop)
    return out


def _band_splits(kernel: T.KernelOp, inner: list[T.ForOp]) -> list[tuple[T.ForOp, str]]:
    """(band, thread axis) for every band that can take one more thread axis, once the `inner` loops are on
    threadIdx.x."""
    out = []
    for band in kernel.walk():
        if not _is_band(band) or any(isinstance(x, T.StageOp) for x in band.walk()):
            continue
        taken = T.bound_axes(band) | T.axes_used_within(band)
        if any(band.is_ancestor_of(lp) for lp in inner):
            taken.add("threadIdx.x")
        axis = next((a for a in T.THREAD_AXES if a not in taken), None)
        if axis is not None:
            out.append((band, axis))
    return out


def _holds_collectives(loop: T.LoopOp) -> bool:
    return any(isinstance(x, (T.CombineOp, T.StageOp)) for x in loop.walk())
