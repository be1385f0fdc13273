from __future__ import annotations

from irforge.dialects.loop.transforms import eliminate_common
from irforge.passes.loop.fusion import merge_sibling_loops, merge_sibling_reductions

from irforge.ir import Operation
from irforge.pass_manager import IntRange, Pass, option


class FuseSiblings(Pass):
    """Merge sibling loops over the same range: reductions into one loop with several carriers, free loops into one.

    Two `loop.reduce`s of one block with the same extent, neither using the other's results, become one loop
    carrying both monoids (the gate and up projections of a SwiGLU MLP share one pass over the input row); the
    loads they share are then made once. The merged loop sits where the first was, so the second may only use
    values defined before it. `max-carriers` bounds the values one loop carries (registers on a GPU). Free loops of
    one block with the same extent are fused first (always legal: a kernel never reads what it stores), so the
    reductions inside them become siblings too.
    """

    name = "loop-fuse-siblings"
    input_level = "loop"
    anchor = "kernel"
    max_carriers: int = option(8, domain=IntRange(1, 16), help="most carrier components one reduce loop may hold")

    def run(self, op: Operation) -> None:
        if merge_sibling_loops(op):
            eliminate_common(op)
        merge_sibling_reductions(op, self.max_carriers)
