from __future__ import annotations

import math

from irforge.dialects import tile as T
from irforge.dialects.tile.vectors import Lanes, loop_lanes
from irforge.passes.tile.heuristics import heuristic

from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option


class TileUnroll(Pass):
    """Unroll the short innermost loops each thread runs whole: their steps' loads issue ahead of the math.

    Which loops: innermost (no loop inside), distributed over no axis (every thread that reaches one runs all its
    trips: a contraction's chunk of K, a thread's walk along a register tile), with more than one trip. Such a
    loop gets `unroll 0` (fully unrolled when materialized) when its trips times its body's work (each op counts
    the elements of the register tile it makes) stay within `max-ops`: the compiler can then hoist trip k + 1's
    shared-memory loads above trip k's fused multiply-adds and fold the trips' offsets into the loads' immediates.

    Left to the lowering: loops distributed over threads or blocks (when every thread makes the same trips,
    lower-to-kernel counts them and unrolls them already, fully up to 8); loops holding a stage or a combine (a
    contraction's K loop: a trip is hundreds of multiply-adds and a barrier, so its slot and phase arithmetic is
    noise, and unrolling it would multiply the code by its trips); loops too long for `max-ops` (an unrolled
    copy per trip would outgrow the instruction cache). A loop with `unroll` is left alone (idempotent); no value
    changes.
    """

    name = "tile-unroll"
    input_level = "tile"
    anchor = "kernel"
    max_ops: int = option(
        0,
        domain=Choices((0, 1, 256, 1024, 4096, 16384)),
        help="most register-tile element operations a loop may unroll to (0: passes/tile/heuristics.py; 1: none)",
    )

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp) or self.max_ops == 1:
            return
        lanes = Lanes()
        for loop in candidates(op):
            budget = self.max_ops or heuristic().unroll_ops(op, loop)
            work = loop.work_items * body_ops(loop, lanes)
            if work <= budget:
                loop.attributes["unroll"] = 0
                self.remark(loop, f"unrolled: {loop.work_items} trips of {work // loop.work_items} operations")
            else:
                self.remark(loop, f"not unrolled: {loop.work_items} trips would be {work} operations (over {budget})")


def candidates(kernel: T.KernelOp) -> list[T.LoopOp]:
    return [
        lp
        for lp in kernel.walk()
        if isinstance(lp, T.LoopOp)
        and not lp.bind
        and "unroll" not in lp.attributes
        and lp.work_items > 1
        and not any(isinstance(x, (T.LoopOp, T.StageOp, T.CombineOp)) for x in lp.walk() if x is not lp)
    ]


def body_ops(loop: T.LoopOp, lanes: Lanes) -> int:
    """A trip's work: each op of the body counts the elements of the register tile its results are."""
    context = loop_lanes(loop.body.ops[0]) if loop.body.ops else []
    total = 0
    for op in loop.body.ops:
        for r in op.results:
            deps = lanes.of(r)
            total += math.prod(ld.size for ld in context if ld in deps)
        total += not op.results
    return max(total, 1)
