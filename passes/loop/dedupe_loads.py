from __future__ import annotations

from irforge.dialects.loop import LoadOp
from irforge.dialects.loop.transforms import eliminate_common, fold_index_ops, simplify_subscripts

from irforge.ir import Operation
from irforge.pass_manager import Pass


class DedupeLoads(Pass):
    """Load each element once: canonicalize subscripts, then merge loads of the same element.

    Subscripts get `loop.index` values substituted and are simplified with the loop extents (what chains of
    reshapes leave behind: `(a0 * 64 + a1) floordiv 64` is `a0` when `a1 < 64`), so loads written differently
    but reading the same element become identical; a load dominated by an identical one is removed.
    """

    name = "loop-dedupe-loads"
    input_level = "loop"
    anchor = "kernel"

    def run(self, op: Operation) -> None:
        fold_index_ops(op)
        simplify_subscripts(op)
        eliminate_common(op, only=LoadOp)
