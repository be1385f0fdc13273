from __future__ import annotations

from irforge.dialects.loop.transforms import hoist_invariants

from irforge.ir import Operation
from irforge.pass_manager import Pass


class LoopInvariantCodeMotion(Pass):
    """Hoist computation out of the loops it does not depend on (loads, scalar math, whole reductions).

    Each pure op moves before every loop (free or reduce) none of its operands comes from, innermost first, so a
    row statistic loaded inside a column loop is loaded once per row. Nothing leaves a loop of extent 0.
    """

    name = "loop-licm"
    input_level = "loop"
    anchor = "kernel"

    def run(self, op: Operation) -> None:
        hoist_invariants(op)
