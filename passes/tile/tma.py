from __future__ import annotations

from irforge.dialects import tile as T
from irforge.passes.tile import banks_layouts
from irforge.passes.tile.heuristics import heuristic
from irforge.passes.tile_to_kernel.memory import why_not_tma

from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option
from irforge.target import target


class TileTma(Pass):
    """Copy staged boxes with the tensor memory accelerator (sm_90): one thread asks, an mbarrier tells all.

    A stage the copy engine can take (`irforge.passes.tile_to_kernel.memory.why_not_tma`: the box is a tensor
    map's, at most 256 elements a dimension with rows of whole 16 bytes; its shared copy dense, or swizzled as the
    engine writes rows of 32, 64 or 128 bytes; no loop around it but its own makes several trips) is marked
    `tma` in place of a copy by the threads (through registers, or cp.async). Materialized, the kernel takes a
    tensor map of the source built on the host, the stage an mbarrier per ring slot; the block's first thread
    announces the box's bytes and requests it, every thread waits for the slot's phase by its parity, and a
    prefetched stage requests trip k + P's box during trip k as cp.async stages do. `stages=auto` leaves it to
    passes/tile/heuristics.py (multi-buffered stages whose best layout the engine can write, by the bank model);
    `all` takes every stage it can, `none` none. The reasons a stage is not taken are remarks. A `tma` stage is
    left alone (idempotent); the copy changes no value a load sees.
    """

    name = "tile-tma"
    input_level = "tile"
    anchor = "kernel"
    stages: str = option(
        "auto",
        domain=Choices(("auto", "all", "none")),
        help="which stages the tensor memory accelerator copies (auto: passes/tile/heuristics.py decides)",
    )

    def check(self, op: Operation) -> str | None:
        if isinstance(op, T.KernelOp) and self.stages == "all" and not target().has("tma"):
            return f"stages=all: {target().arch} has no tensor memory accelerator (sm_90 and later have it)"
        return None

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp) or self.stages == "none" or not target().has("tma"):
            return
        for st in [s for s in op.walk() if isinstance(s, T.StageOp) and s.copy != "tma"]:
            with banks_layouts.trying(st, {"copy": "tma"}):
                why = why_not_tma(st)
            if why is None and self.stages == "auto" and not heuristic().copy_engine(op, st):
                why = "stays a copy by the threads: single-buffered, or a layout the engine cannot write costs less"
            if why is None:
                st.attributes["copy"] = "tma"
            self.remark(st, f"%{st.result.name_hint} {why or 'is copied by the tensor memory accelerator'}")
