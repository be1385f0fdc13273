from __future__ import annotations

from irforge.passes.loop.fusion import Trial, fuse_producers

from irforge.builtin import FuncOp
from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option


class FuseBroadcast(Pass):
    """Recompute cheap producers (no reductions) in their consumers instead of materializing them.

    A producer read with a broadcast (`x + bias` feeding a matmul's reduction, read once per output column) or by
    several kernels is inlined although its elements are then computed more than once, as long as the program's
    work grows by at most `max-recompute` times the work of the two kernels involved (dynamic loads, stores and
    scalar ops, measured after hoisting and merging).
    """

    name = "loop-fuse-broadcast"
    input_level = "loop"
    max_recompute: float = option(
        1.0,
        domain=Choices((0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)),
        help="extra work a fusion may add by recomputation, as a fraction of the fused kernels' work",
    )

    def run(self, op: Operation) -> None:
        for func in [o for o in op.walk() if isinstance(o, FuncOp)]:
            fuse_producers(
                func, lambda t: recompute_refusal(t, self.max_recompute), reductions=False, remark=self.remark
            )


def recompute_refusal(t: Trial, max_recompute: float) -> str | None:
    """Why a fusion recomputing the producer would add too much work (None: within `max_recompute`)."""
    if t.work_after > (1.0 + max_recompute) * t.work_before:
        return (
            f"the work would grow {t.growth():.2f}x ({t.work_before:g} -> {t.work_after:g}), past the limit of "
            f"{1.0 + max_recompute:g}x (max-recompute={max_recompute:g})"
        )
    return None
