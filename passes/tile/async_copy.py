from __future__ import annotations

from irforge.dialects import tile as T

from irforge.ir import Operation
from irforge.pass_manager import Pass
from irforge.target import target


class TileAsyncCopy(Pass):
    """Copy stages with cp.async: global to shared memory without going through registers (sm_80 and later).

    A `tile.stage` whose box rows and source rows split into aligned pieces of 4, 8 or 16 bytes is marked `async`:
    materialized, each thread issues its pieces as `cp.async`, commits them as a group and waits for it before the
    barrier (or, prefetched by `tile-pipeline`, only when the trip that reads it comes). Stages copied otherwise
    already, and targets without cp.async, are left alone.
    """

    name = "tile-async-copy"
    input_level = "tile"
    anchor = "kernel"

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp) or not target().has("cp.async"):
            return
        for st in [s for s in op.walk() if isinstance(s, T.StageOp)]:
            if st.copy == "sync" and st.copy_width() * st.result.type.dtype.bytes >= 4:
                st.attributes["copy"] = "async"
