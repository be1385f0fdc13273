from __future__ import annotations

from irforge.dialects.loop.transforms import fuse_producers

from irforge.builtin import FuncOp
from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option


class FuseReductions(Pass):
    """Inline kernels holding reductions into their consumers: epilogues, and reductions feeding reductions.

    The consumer's loads of a reduced buffer become the reduction itself (hoisted out of every loop it does not
    depend on), so `relu(x @ w)` or RMSNorm's normalization run in the kernel that reduces. A reduction is never
    computed twice: the fusion is refused when the reduction work of the program would grow -- the consumer reads
    the buffer through several subscripts, its loops cannot hoist the reduction, or another kernel still needs the
    buffer. With `interchange`, the consumer's free loops are first reordered so those the reduction does not depend
    on run inside it (softmax over a leading axis reduces per column, then writes the column). The non-reduction
    part of the producer may be recomputed within `max-recompute` (as in `loop-fuse-broadcast`).
    """

    name = "loop-fuse-reductions"
    input_level = "loop"
    max_recompute: float = option(
        1.0,
        domain=Choices((0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)),
        help="extra work a fusion may add by recomputing the producer's elementwise part, as a fraction",
    )
    interchange: bool = option(True, help="reorder the consumer's free loops so the reduction can be hoisted")

    def run(self, op: Operation) -> None:
        limit = 1.0 + self.max_recompute
        for func in [o for o in op.walk() if isinstance(o, FuncOp)]:
            fuse_producers(
                func,
                lambda t: (
                    t.has_reduction
                    and t.reduction_work_after <= t.reduction_work_before
                    and t.work_after <= limit * t.work_before
                ),
                interchange=self.interchange,
            )
