from __future__ import annotations

from irforge.dialects import tile as T
from irforge.passes.tile import banks_layouts
from irforge.passes.tile.heuristics import heuristic

from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option


class TilePadSmem(Pass):
    """Pad the rows of staged boxes in shared memory where the bank model proves it saves wavefronts.

    Each stage whose rows are not padded yet weighs the pads `passes/tile/heuristics.py` lists with the bank
    model (`irforge.passes.tile.banks`: the wavefronts its reads and its copy take per fill, as lower-to-kernel
    issues them, on top of any swizzle it has) and takes the one with the fewest if it beats the rows as they are;
    ties go to the smaller pad. A pad that would narrow a vector (16-byte reads and cp.async pieces need rows of
    whole, aligned vectors) or overflow shared memory is out, and a stage the tensor memory accelerator copies
    keeps dense rows (the engine writes them so), as does one stored in blocks of columns (`columns`). Each
    decision is a remark listing every candidate's cost (`irforge-opt -debug-only=tile-pad-smem`, `irforge
    compile -v`). `pad` forces one pad on every stage not padded yet, refused (`check`) where it is out. A padded
    stage is left alone (idempotent); no load sees a different value.
    """

    name = "tile-pad-smem"
    input_level = "tile"
    anchor = "kernel"
    pad: int = option(
        -1,
        domain=Choices((-1, 0, 1, 2, 4, 8, 16, 32)),
        help="elements added to each row of a staged box (-1: the bank model's best of passes/tile/heuristics.py's "
        "pads; 0: none)",
    )

    def check(self, op: Operation) -> tuple[Operation, str] | None:
        if not isinstance(op, T.KernelOp) or self.pad <= 0:
            return None
        return banks_layouts.refusal(candidates(op), {"pad": self.pad}, f"pad={self.pad}")

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp) or self.pad == 0:
            return
        for st in candidates(op):
            if self.pad > 0:
                st.attributes["pad"] = self.pad
            elif st.copy == "tma":
                self.remark(st, f"%{st.result.name_hint}: the tensor memory accelerator writes its rows dense")
            else:
                layouts = [{"pad": p} for p in heuristic().smem_pads(op, st)]
                current, best, tried = banks_layouts.choose(st, layouts)
                self.remark(st, banks_layouts.proof(st, current, best, tried))
                if best is not current:
                    st.attributes["pad"] = best.layout["pad"]


def candidates(kernel: T.KernelOp) -> list[T.StageOp]:
    """Stages not padded yet, but those stored in blocks of columns (the copy engine's layout: rows dense)."""
    return [
        st
        for st in kernel.walk()
        if isinstance(st, T.StageOp) and "pad" not in st.attributes and "columns" not in st.attributes
    ]
