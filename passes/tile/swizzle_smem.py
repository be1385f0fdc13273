from __future__ import annotations

from dataclasses import dataclass

from irforge.dialects import tile as T
from irforge.dialects.tile import fragments
from irforge.passes.tile import banks_layouts
from irforge.passes.tile.heuristics import heuristic

from irforge.ir import Operation
from irforge.pass_manager import Domain, Pass, option


@dataclass(frozen=True)
class Swizzles(Domain):
    """() (the bank model chooses), (0, 0, 0) (none), or a swizzle (B, M, S): B in 1..3, M in 0..4, S in 1..7."""

    def __contains__(self, v) -> bool:
        if v in ((), (0, 0, 0)):
            return True
        return isinstance(v, tuple) and len(v) == 3 and 1 <= v[0] <= 3 and 0 <= v[1] <= 4 and 1 <= v[2] <= 7

    def values(self) -> tuple:
        triples = ((b, m, s) for b in range(1, 4) for m in range(5) for s in range(1, 8))
        return ((), (0, 0, 0), *triples)

    def __str__(self) -> str:
        return '"" (the model), 0,0,0 (none) or B,M,S (B 1..3, M 0..4, S 1..7)'


class TileSwizzleSmem(Pass):
    """Swizzle staged boxes in shared memory where the bank model proves it saves wavefronts.

    A swizzle (B, M, S) stores element offset `o` of the shared copy at `o ^ (((o >> (M + S)) & (2^B - 1)) <<
    M)`: units of 2^M elements keep their order, and the unit index's low B bits are XORed with the B bits S above
    them, so rows that would meet in one bank fall into different ones, at no cost in memory. Each stage not
    swizzled yet weighs the swizzles `passes/tile/heuristics.py` lists (units as wide as its widest vector) with
    the bank model (`irforge.passes.tile.banks`, on top of any pad it has) and takes the one with the fewest
    wavefronts if it beats the layout it has; ties go to the earlier (fewer bits). A stage the tensor memory
    accelerator copies can only take the swizzle the engine writes its rows with (rows of 32, 64 or 128 bytes);
    one that wgmma reads through descriptors (laid out on wgmma by `tile-tensorize`, the engine copying every
    factor of its loop: else the loop runs on mma.sync) takes it whatever the model says, as the only
    layout a descriptor names, and rows longer than 128 bytes (a head dimension of 128 in 16 bits) are stored in
    blocks of 128 bytes (`columns`), each swizzled so, the engine copying a block at a time.
    No swizzle may narrow a vector or move elements past the copy. Each decision is a remark listing every
    candidate's cost. `swizzle` forces one on every stage not swizzled yet, refused (`check`) where it is out. A
    swizzled stage is left alone (idempotent); no load sees a different value.
    """

    name = "tile-swizzle-smem"
    input_level = "tile"
    anchor = "kernel"
    swizzle: tuple[int, ...] = option(
        (),
        domain=Swizzles(),
        help="B,M,S for every staged box (empty: the bank model's best of passes/tile/heuristics.py's; 0,0,0: none)",
    )

    def check(self, op: Operation) -> tuple[Operation, str] | None:
        if not isinstance(op, T.KernelOp) or self.swizzle in ((), (0, 0, 0)):
            return None
        return banks_layouts.refusal(
            candidates(op), {"swizzle": self.swizzle}, f"swizzle={','.join(map(str, self.swizzle))}"
        )

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp) or self.swizzle == (0, 0, 0):
            return
        read_by_wgmma = fragments.descriptor_stages(op, copied=True)
        for st in candidates(op):
            if self.swizzle:
                st.attributes["swizzle"] = self.swizzle
                continue
            layout = banks_layouts.descriptor_layout(st) if st in read_by_wgmma else None
            if layout is not None:
                st.attributes.update(layout)
                blocks = f" in blocks of {layout['columns']} columns" if "columns" in layout else ""
                self.remark(
                    st, f"%{st.result.name_hint}: swizzle{layout['swizzle']}{blocks}, read by wgmma through descriptors"
                )
                continue
            if st.copy == "tma":
                sw = banks_layouts.tma_layout(st)
                options = [sw] if sw is not None else []
            else:
                options = heuristic().smem_swizzles(op, st)
            current, best, tried = banks_layouts.choose(st, [{"swizzle": sw} for sw in options])
            self.remark(st, banks_layouts.proof(st, current, best, tried))
            if best is current:
                continue
            pad = None if st.copy == "tma" or "pad" in st.attributes else _padded_as_well(op, st, best)
            if pad is not None:
                self.remark(st, f"%{st.result.name_hint}: left to tile-pad-smem: {pad.name()} takes as few wavefronts")
            else:
                st.attributes["swizzle"] = best.layout["swizzle"]


def _padded_as_well(
    kernel: T.KernelOp, stage: T.StageOp, swizzled: banks_layouts.Candidate
) -> banks_layouts.Candidate | None:
    """The best pad of the stage when it takes no more wavefronts than `swizzled` (None otherwise): a pad moves
    rows by a constant that folds into each access's offset, where a swizzle XORs every address (instructions and
    registers in the inner loop: the A-transposed product of a K-major weight spilled under it)."""
    _, best, _ = banks_layouts.choose(stage, [{"pad": p} for p in heuristic().smem_pads(kernel, stage)])
    return (
        best
        if "pad" in best.layout and best.layout["pad"] and best.cost.wavefronts <= swizzled.cost.wavefronts
        else None
    )


def candidates(kernel: T.KernelOp) -> list[T.StageOp]:
    return [st for st in kernel.walk() if isinstance(st, T.StageOp) and "swizzle" not in st.attributes]
