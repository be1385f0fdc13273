from __future__ import annotations

from irforge.passes.loop.fusion import Trial, fuse_producers, streamed_prologue

from irforge.builtin import FuncOp
from irforge.ir import Operation
from irforge.pass_manager import Pass


class FusePrologues(Pass):
    """Recompute a row's normalization in the contractions that stream a weight behind it (prototype)."""

    name = "loop-fuse-prologues"
    input_level = "loop"

    def run(self, op: Operation) -> None:
        for func in [o for o in op.walk() if isinstance(o, FuncOp)]:
            fuse_producers(func, self._refusal, reductions=True, remark=self.remark)

    def _refusal(self, t: Trial) -> str | None:
        return None if streamed_prologue(t) else "not a prologue of a streaming contraction"
