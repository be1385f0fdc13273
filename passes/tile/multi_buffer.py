from __future__ import annotations

import math

from irforge.dialects import tile as T
from irforge.passes.tile.heuristics import heuristic
from irforge.passes.tile.stage_inputs import staged_bytes

from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option
from irforge.target import target


class TileMultiBuffer(Pass):
    """Give a stage in a loop a ring of buffers, so a trip's copy never waits for the previous trip's readers.

    A `tile.stage` directly in a loop that is neither distributed nor vectorized (a contraction's chunk of K) and
    that runs more than once gets `ring stages`: trip k copies into buffer k mod stages. Materialized, the barrier
    before each copy goes (the buffer it overwrites was read `stages` trips ago, behind a barrier since), and with
    `tile-pipeline` the copies of the next trips fly while this one computes. A stage that has a ring is left alone
    (idempotent). A ring that would not fit the block's shared memory shrinks to the deepest that does (the
    heuristic's; one of `stages` asked for stays as asked or is not made).
    """

    name = "tile-multi-buffer"
    input_level = "tile"
    anchor = "kernel"
    stages: int = option(
        0, domain=Choices((0, 1, 2, 3, 4, 5, 6, 8)), help="buffers per stage (0: passes/tile/heuristics.py; 1: none)"
    )

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp) or self.stages == 1:
            return
        for st in [s for s in op.walk() if isinstance(s, T.StageOp)]:
            if st.ring > 1 or st.why_not_ring() or st.parent_op.work_items < 2:
                continue
            slot = math.prod(st.box) * st.result.type.dtype.bytes
            fits = lambda n: staged_bytes(op) + slot * (n - 1) <= target().smem_per_block
            ring = self.stages or heuristic().ring(op, st)
            if not self.stages:  # the heuristic's ring, or the deepest that fits under it
                ring = max((n for n in range(2, ring + 1) if fits(n)), default=1)
            if ring > 1 and fits(ring):
                st.attributes["ring"] = ring
