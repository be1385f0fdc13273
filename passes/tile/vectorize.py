from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.tile.vectors import why_slow
from irforge.passes.tile.heuristics import heuristic

from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option


class TileVectorize(Pass):
    """Give loops vector work items: each thread takes `width` consecutive iterations at once (16-byte accesses).

    A loop (free or reduce) whose innermost index only feeds subscripts, each either independent of it or
    contiguous in it (the element offset steps by 1 along each vector of `width` iterations: coefficient 1, or
    through a reshape's `floordiv` and `mod` that no vector carries across; lane 0 at a multiple of the width:
    aligned), gets
    `vector width` (`width` is a ceiling: each loop takes the widest power of two up to it that it allows;
    `irforge.dialects.tile.vectors.why_slow` says what stops a wider one). Materialized, the values that depend on
    the index become register tiles of `width` elements (one 16-byte load or store each), the rest stay scalars.
    Loops with loops inside are left alone (lanes through inner loops come with register tiling). Loops already
    vectorized are left alone, so the pass is idempotent. The grid shrinks to the fewer work items.
    """

    name = "tile-vectorize"
    input_level = "tile"
    anchor = "kernel"
    width: int = option(
        0,
        domain=Choices((0, 1, 2, 4, 8, 16)),
        help="most elements per work item: each loop takes the widest power of two up to it that it allows (0: "
        "16 bytes of the narrowest type the loop accesses, by passes/tile/heuristics.py; 1: no vectors)",
    )

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp) or self.width == 1:
            return
        for loop in _candidates(op):
            narrowest = min((a.operands[0].type.dtype.bytes for a in _accesses(loop)), default=4)
            ceiling = self.width or max(1, 16 // narrowest)
            if self.width == 0:
                width = heuristic().vector_width(
                    op, loop, narrowest, lambda v, lp=loop: why_slow(lp, len(lp.extents) - 1, v) is None
                )
            else:
                width = self.width
                while width > 1 and why_slow(loop, len(loop.extents) - 1, width):
                    width //= 2
            if width > 1:
                loop.set_vector((1,) * (len(loop.extents) - 1) + (width,))
            if width < ceiling:
                why = (
                    why_slow(loop, len(loop.extents) - 1, 2 * width)
                    or "the block's threads would outnumber the work items"
                )
                self.remark(loop, f"vector width {width}, not {2 * width}: {why}")
            else:
                self.remark(loop, f"vectorized by {width}")
        T.fit_grid(op)


def _candidates(kernel: T.KernelOp) -> list[T.LoopOp]:
    """Loops not vectorized yet with no loop inside."""
    return [
        lp
        for lp in kernel.walk()
        if isinstance(lp, T.LoopOp)
        and lp.vector == 1
        and lp.extents
        and not any(isinstance(x, T.LoopOp) for x in lp.walk() if x is not lp)
    ]


def _accesses(loop: T.LoopOp) -> list[Operation]:
    return [x for x in loop.walk() if isinstance(x, (T.LoadOp, T.StoreOp))]
