from __future__ import annotations

from irforge.dialects.loop.transforms import eliminate_common

from irforge.ir import Operation
from irforge.pass_manager import Pass


class LoopCommonSubexpressions(Pass):
    """Merge identical computation in a kernel, whole reductions included.

    A pure op (scalar math, load, index arithmetic, or a `loop.reduce` compared with its body) is replaced by an
    identical one that dominates it. Loads are pure at this level because a kernel never writes what it reads.
    """

    name = "loop-cse"
    input_level = "loop"
    anchor = "kernel"

    def run(self, op: Operation) -> None:
        eliminate_common(op)
