from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.tile import fragments, vectors
from irforge.passes.tile.heuristics import heuristic

from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option
from irforge.target import target


class TileTensorize(Pass):
    """Map contractions onto tensor cores: a thread loop's register tiles become MMA accumulator fragments.

    A loop over a contraction's output tile on `threadIdx.x` (`tile-blockify`), not laid out yet (no vector),
    whose products the tensor cores can compute (f16 or bf16 factors widened to f32 accumulators, each read from a
    buffer whose last two dimensions are the tile's index and the reduction's: `irforge.dialects.tile.fragments`),
    takes the layout of an atom's accumulator over `warps` (rows x columns) warp tiles and `atom`: each thread's
    points are its lane's share of the accumulator, and `lower-to-kernel` computes the contraction with the atom's
    instructions (mma.sync with ldmatrix from staged slabs; on sm_90a wgmma reading the staged slabs through
    shared-memory descriptors), the thread's register tile being the fragment. The epilogue after the reduction
    (bias, residual, activations, the cast to the output type) runs on that register tile as before.

    `atom` picks the instruction family (`auto`: the heuristic's choice, which leaves decode-shaped products to the
    SIMT path and takes wgmma where the target has it and the factors are K-major loads; `none`: leave every loop
    alone). `mma` cuts the tile into warp tiles of m16n8k16 atoms; `wgmma` stacks warpgroups of 64 rows, each warp
    16 of them, over all the tile's columns (the N of the instruction, at most 256), the same lane layout as mma
    warp tiles of 16 rows, so lower-to-kernel falls back to mma.sync where the slabs cannot feed descriptors.
    `wm` and `wn` fix the warp tile (0: the squarest the block's warps allow). A loop that cannot take the layout
    keeps its schedule, and the pass says why (`-v`).

    Attention is laid out by the same rule, found by its algebra (`fragments.attention_operands`: an online carrier
    whose key is a contraction, the scores, and whose weights are 16-bit factors, V): each warp whole rows of O
    (warps [k, 1]), so a row's scores, their max and exp(x - m) stay in its lanes, on mma atoms or (`atom=wgmma`)
    warpgroups of 64 rows whose wgmmas read K and V through descriptors and Q and exp(x - m) from registers;
    `lower-to-kernel` computes both products on the atoms (`passes/tile_to_kernel/flash.py`). A warp tile of 4 to 8
    rows (a decode step's GQA group of heads at one position) takes the atoms' top halves, one row a lane (lanes
    past the rows, ghosts, take part in the mma and store nothing).
    """

    name = "tile-tensorize"
    input_level = "tile"
    anchor = "kernel"
    atom: str = option(
        "auto",
        domain=Choices(("auto", "mma", "wgmma", "none")),
        help="instruction family: mma (mma.sync m16n8k16, sm_80+), wgmma (m64nNk16, sm_90a); auto: "
        "passes/tile/heuristics.py; none: off",
    )
    wm: int = option(0, domain=Choices((0, 16, 32, 64, 128)), help="rows of a warp tile (0: heuristic)")
    wn: int = option(
        0,
        domain=Choices((0, 8, 16, 32, 64, 128, 256)),
        help="columns of a warp tile (wgmma: the tile's, N; 0: heuristic)",
    )

    def check(self, op: Operation) -> str | None:
        if not isinstance(op, T.KernelOp) or self.atom == "none":
            return None
        if self.atom == "mma" and not target().has("ldmatrix"):
            return f"atom=mma needs mma.sync and ldmatrix (sm_80); the target is {target().arch}"
        if self.atom == "wgmma" and not target().has("wgmma"):
            return f"atom=wgmma needs sm_90a; the target is {target().arch}"
        for loop in candidates(op):
            if isinstance(_operands(loop), str):
                continue  # declined whatever the warp tile
            if (self.wm or self.wn) and self._warps(op, loop, self._family(op, loop)) is None:
                return (
                    f"wm={self.wm} wn={self.wn} do not cut the {list(loop.extents)} tile into one warp tile per warp "
                    f"of the block's {op.threads // target().warp_size}"
                )
        return None

    def _family(self, kernel: T.KernelOp, loop: T.ForOp) -> str:
        if self.atom != "auto":
            return self.atom
        if isinstance(_operands(loop), fragments.AttentionOperands):
            return heuristic().attention_atom(kernel, loop, *loop.ivs) or "mma"
        return heuristic().tensor_atom(kernel, loop, *loop.ivs) or "mma"

    def _atom(self, loop: T.ForOp, family: str) -> fragments.Atom | None:
        return fragments.wgmma_atom(loop.extents) if family == "wgmma" else fragments.Atom.parse("mma.m16n8k16")

    def _warps(self, kernel: T.KernelOp, loop: T.ForOp, family: str) -> tuple[int, int] | None:
        atom = self._atom(loop, family)
        count = kernel.threads // target().warp_size
        if atom is None or count == 0:  # a block of less than a warp holds no atom
            return None
        if isinstance(_operands(loop), fragments.AttentionOperands):
            # each warp takes whole rows of O, so a row's scores, max and exp(x - m) stay in its lanes (on wgmma a
            # warpgroup's 64 rows, 16 a warp)
            warps = (count, 1)
            fixed_ok = self.wn in (0, loop.extents[1]) and self.wm in (0, loop.extents[0] // count)
            return warps if fixed_ok and fragments.why_not_layout(loop.extents, warps, atom) is None else None
        if family == "wgmma":
            warps = (count, 1)
            fixed_ok = self.wm in (0, 16) and self.wn in (0, loop.extents[1])
            return (
                warps if fixed_ok and fragments.why_not_layout(loop.extents, warps, atom, top=False) is None else None
            )
        if not (self.wm or self.wn):
            return heuristic().warp_grid(kernel, loop, atom)
        e0, e1 = loop.extents
        w0 = e0 // self.wm if self.wm and e0 % self.wm == 0 else None
        w1 = e1 // self.wn if self.wn and e1 % self.wn == 0 else None
        w0 = w0 if w0 is not None else (count // w1 if w1 and count % w1 == 0 else None)
        w1 = w1 if w1 is not None else (count // w0 if w0 and count % w0 == 0 else None)
        if w0 is None or w1 is None or w0 * w1 != count:
            return None
        if fragments.why_not_layout(loop.extents, (w0, w1), atom, top=False):
            return None
        return w0, w1

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp) or self.atom == "none":
            return
        for loop in candidates(op):
            why = self._why_not(op, loop)
            if why:
                self.remark(loop, f"stays on the SIMT path: {why}")
                continue
            family = self._family(op, loop)
            warps = self._warps(op, loop, family)
            layout = fragments.acc_layout(loop.extents, warps)
            loop.set_vector(layout.vector)
            loop.attributes["split"] = layout.split
            loop.attributes["warps"] = layout.warps
            atom = self._atom(loop, family)
            loop.attributes["atom"] = str(atom)
            w0, w1 = warps
            self.remark(
                loop, f"on {atom}: {w0} x {w1} warps of {loop.extents[0] // w0} x {loop.extents[1] // w1} outputs"
            )

    def _why_not(self, kernel: T.KernelOp, loop: T.ForOp) -> str | None:
        ops = _operands(loop)
        if isinstance(ops, str):
            return ops
        attention = isinstance(ops, fragments.AttentionOperands)
        auto = heuristic().attention_atom(kernel, loop, *loop.ivs) if attention else None
        if self.atom == "auto" and not attention and heuristic().tensor_atom(kernel, loop, *loop.ivs) is None:
            return "the default schedule keeps it there (decode-shaped, or no tensor cores on the target)"
        if self.atom == "auto" and attention and auto is None:
            return "the default schedule keeps it there (decode-shaped, or no tensor cores on the target)"
        if not target().has("ldmatrix"):
            return f"{target().arch} has no mma.sync"
        if kernel.axis_size("threadIdx.y") * kernel.axis_size("threadIdx.z") != 1 or loop.bind != ("threadIdx.x",):
            return "its threads are not the block's along x alone"
        family = self._family(kernel, loop)
        if family == "wgmma":
            why = fragments.why_not_attention_descriptors(ops) if attention else fragments.why_not_descriptors(ops)
            if why:
                return why
        warps = self._warps(kernel, loop, family)
        if warps is None:
            what = "warpgroups of 64 rows" if family == "wgmma" else "warp tiles"
            return f"the block's {kernel.threads} threads do not cut its {list(loop.extents)} outputs into {what}"
        # the epilogue runs on the fragment's lanes: each of its accesses must follow them (lower-to-kernel's rule)
        layout = fragments.acc_layout(loop.extents, warps)
        return vectors.why_not(loop, layout.vector, layout.split)


def _operands(loop: T.ForOp) -> fragments.Operands | fragments.AttentionOperands | str:
    return fragments.any_operands(loop, *loop.ivs)


def candidates(kernel: T.KernelOp) -> list[T.ForOp]:
    """Two-dimensional loops on thread axes, not laid out yet, whose points a contraction's outputs are."""
    from irforge.passes.tile.register_tile import candidates as contraction_loops

    return [lp for lp, _, _ in contraction_loops(kernel) if len(lp.extents) == 2 and "split" not in lp.attributes]
