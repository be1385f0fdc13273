from __future__ import annotations

from irforge.passes.loop.fusion import Trial, fuse_producers

from irforge.builtin import FuncOp
from irforge.ir import Operation
from irforge.pass_manager import Pass


class FuseElementwise(Pass):
    """Inline producers without reductions into their consumers when that adds no work.

    Elementwise chains, index maps (transposes, reshapes, broadcasts read once per element), constants and iotas
    disappear into the kernel that reads them: each load of the producer's buffer becomes the producer's
    computation at that element, after which invariant computation is hoisted and duplicates merged. The fusion
    happens when the program's work (dynamic loads, stores and scalar ops) does not grow, so nothing is ever
    computed twice; recomputing a producer is `loop-fuse-broadcast`'s decision.
    """

    name = "loop-fuse-elementwise"
    input_level = "loop"

    def run(self, op: Operation) -> None:
        for func in [o for o in op.walk() if isinstance(o, FuncOp)]:
            fuse_producers(func, _refusal, reductions=False, remark=self.remark)


def _refusal(t: Trial) -> str | None:
    if t.work_after > t.work_before:
        return f"the work would grow {t.growth():.2f}x ({t.work_before:g} -> {t.work_after:g}); this pass adds none"
    return None
