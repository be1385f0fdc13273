from __future__ import annotations

from irforge.ir import Operation
from irforge.pass_manager import Pass
from irforge.rewrite import is_trivially_dead


class DeadCodeElimination(Pass):
    """Erase pure ops whose results are never used (transitively, in one backward sweep per block)."""

    name = "dce"

    def run(self, op: Operation) -> None:
        for inner in list(op.walk(post_order=True)):
            if inner is not op and inner.parent is not None:
                _sweep(inner)
        _sweep(op)


def _sweep(op: Operation) -> None:
    for region in op.regions:
        for block in region.blocks:
            for inner in reversed(list(block.ops)):
                if is_trivially_dead(inner):
                    inner.erase()
