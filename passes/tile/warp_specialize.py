from __future__ import annotations

from irforge.dialects import tile as T
from irforge.passes.tile.heuristics import heuristic
from irforge.passes.tile_to_kernel.memory import why_not_producer

from irforge.attributes import UNIT
from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option


class TileWarpSpecialize(Pass):
    """Give a loop's copies to a producer warp: the block's threads compute, one more warp issues the copies.

    The stages of a loop copied by the tensor memory accelerator into rings (`tile-tma`, `tile-multi-buffer`) become
    `producer` stages: materialized, a warp added to the block walks the loop on its own, waiting for each slot to
    be released and requesting the trip's boxes, while the block's threads wait for each trip's boxes and release
    the slots they are done reading (full and empty mbarriers per slot; the wgmma group a trip leaves in flight
    holds its slot one trip more). The loop keeps no block-wide barrier, and the copies run as far ahead as the
    ring allows; a stage's `prefetch` gives way to that. `producer`: `auto` (passes/tile/heuristics.py: loops whose
    slabs wgmma reads), `on` (every loop that can), `off`. A loop that cannot take it keeps its copies, and the
    pass says why (`-v`): other stages or cross-thread combines in the kernel need barriers the producer warp would
    not reach (`memory.why_not_producer`).
    """

    name = "tile-warp-specialize"
    input_level = "tile"
    anchor = "kernel"
    producer: str = option(
        "auto",
        domain=Choices(("auto", "on", "off")),
        help="which loops get a producer warp (auto: passes/tile/heuristics.py decides; off: none)",
    )

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp) or self.producer == "off":
            return
        loops: dict = {}
        for st in [s for s in op.walk() if isinstance(s, T.StageOp)]:
            if st.copy == "tma" and st.ring > 1 and not st.producer and isinstance(st.parent_op, T.LoopOp):
                loops.setdefault(st.parent_op, []).append(st)
        for loop, stages in loops.items():
            if self.producer == "auto" and not heuristic().warp_specialize(op, loop):
                continue
            saved = [dict(st.attributes) for st in stages]
            for st in stages:
                st.attributes.pop("prefetch", None)
                st.attributes["producer"] = UNIT
            why = next((w for st in stages if (w := why_not_producer(st))), None)
            if why is not None:
                for st, attrs in zip(stages, saved):
                    st.attributes.clear()
                    st.attributes.update(attrs)
                self.remark(loop, f"keeps its copies: a stage {why}")
                continue
            self.remark(loop, f"its {len(stages)} stages are copied by a producer warp")
