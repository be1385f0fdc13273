from __future__ import annotations

from irforge.dialects import tile as T
from irforge.passes.tile.heuristics import heuristic

from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option


class TilePipeline(Pass):
    """Software-pipeline a loop's stages: issue the copy for trip k + depth while trip k computes.

    An asynchronous stage (`tile-async-copy`) with a ring of buffers (`tile-multi-buffer`) whose box depends only on its
    loop's index gets `prefetch depth` (at most ring - 1: the buffer being filled is never the one being read; by
    default ring - 1, or ring - 2 where wgmma reads the slabs from a ring of 4 or more, so that a trip may leave its
    group of wgmmas in flight: `passes/tile/heuristics.py`). Materialized, the first `depth` trips' copies are issued
    before the loop; each trip waits for its own copy (letting the `depth` newer ones fly), passes a barrier, issues
    trip k + depth's copy and computes. Stages without an async copy or a ring are left alone (the pass declines them),
    and so are stages already prefetched.
    """

    name = "tile-pipeline"
    input_level = "tile"
    anchor = "kernel"
    depth: int = option(
        0, domain=Choices((0, 1, 2, 3, 4, 5, 7)), help="trips copied ahead (0: as many as the ring allows)"
    )

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp):
            return
        loops: dict = {}
        for st in [s for s in op.walk() if isinstance(s, T.StageOp)]:
            if not st.prefetch and st.ring > 1 and st.why_not_prefetch() is None:
                loops.setdefault(st.parent_op, []).append(st)
        for stages in loops.values():
            # One depth per loop: its trips wait for groups of all its stages' copies together.
            depth = min(min(self.depth, s.ring - 1) if self.depth else heuristic().prefetch(op, s) for s in stages)
            for st in stages:
                st.attributes["prefetch"] = depth
