from __future__ import annotations

from irforge.passes.loop.fuse_broadcast import recompute_refusal
from irforge.passes.loop.fusion import Trial, fuse_producers

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
        for func in [o for o in op.walk() if isinstance(o, FuncOp)]:
            fuse_producers(func, self._refusal, reductions=True, interchange=self.interchange, remark=self.remark)

    def _refusal(self, t: Trial) -> str | None:
        if t.reduction_work_after > t.reduction_work_before:
            return (
                f"the reduction work would grow {t.reduction_work_after / t.reduction_work_before:.2f}x "
                f"({t.reduction_work_before:g} -> {t.reduction_work_after:g}); a reduction is never computed twice"
            )
        return recompute_refusal(t, self.max_recompute)
