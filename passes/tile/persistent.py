from __future__ import annotations

from irforge.dialects import tile as T
from irforge.passes.tile.heuristics import heuristic
from irforge.passes.tile.rasterize import blocks_per_sm
from irforge.passes.tile_to_kernel.memory import producer_registers, producer_stages

from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option
from irforge.target import target


class TilePersistent(Pass):
    """Keep a kernel's blocks resident: a grid of as many blocks as the GPU holds at once, each walking tiles.

    The band over `blockIdx.x` keeps its tiles (and their raster order); the grid shrinks to the blocks that fit
    on the GPU together (`sm_count` times the blocks a multiprocessor holds), and block b takes tiles b, b + grid,
    b + 2 grid, ... in a loop (`unroll 1`). Where a producer warp copies the tiles' slabs, it runs on into the next
    tile's slabs while the block's threads finish the last tile (store its outputs), so neither the block's start
    (mbarrier set-up, the first copies' latency) nor its epilogue leaves the tensor cores idle between tiles; the
    rings' phases count the trips over all of a block's tiles. `blocks`: `auto` (passes/tile/heuristics.py: kernels
    whose slabs a producer warp copies, a few tiles a block), `on` (every kernel that can), `off`. A kernel that
    cannot take it keeps its grid, and the pass says why (`-v`): it needs a single band over `blockIdx.x` alone,
    with more tiles than fit at once, no combine across blocks, and no stage but a producer warp's (a ring the
    block's threads fill counts its phases within one tile). The tiles each block computes change, no value does.
    """

    name = "tile-persistent"
    input_level = "tile"
    anchor = "kernel"
    blocks: str = option(
        "auto",
        domain=Choices(("auto", "on", "off")),
        help="which kernels keep their blocks resident (auto: passes/tile/heuristics.py decides; off: none)",
    )

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp) or self.blocks == "off":
            return
        band, why = persistent_band(op)
        if band is None:
            self.remark(op, f"keeps its grid: {why}")
            return
        grid = resident_blocks(op)
        if self.blocks == "auto" and not heuristic().persistent(op, band, grid):
            self.remark(op, "keeps its grid: passes/tile/heuristics.py leaves it to the GPU's block scheduler")
            return
        tiles = band.work_items
        op.set_axis_size("blockIdx.x", grid)
        band.attributes["unroll"] = 1  # a trip is a whole tile: unrolled, the code would grow by the trips
        self.remark(op, f"{grid} resident blocks walk its {tiles} tiles ({tiles / grid:.2f} a block)")


def resident_blocks(kernel: T.KernelOp) -> int:
    """Blocks the GPU holds at once: one a multiprocessor where a producer warpgroup shares the register file out
    (the consumers take what it gives back), else `rasterize.blocks_per_sm`'s estimate."""
    per_sm = 1 if producer_registers(kernel) and producer_stages(kernel) else blocks_per_sm(kernel)
    return target().sm_count * per_sm


def persistent_band(kernel: T.KernelOp) -> tuple[T.ForOp | None, str]:
    """The kernel's band over `blockIdx.x` that its blocks can walk, or None and why not."""
    bands = [lp for lp in kernel.walk() if isinstance(lp, T.LoopOp) and set(lp.bind) & set(T.BLOCK_AXES)]
    if len(bands) != 1 or not isinstance(bands[0], T.ForOp) or tuple(bands[0].bind) != ("blockIdx.x",):
        return None, "its blocks are not one band over blockIdx.x alone"
    band = bands[0]
    if band.parent_op is not kernel:
        return None, "its band over blockIdx.x is inside another loop"
    if kernel.axis_size("blockIdx.y") * kernel.axis_size("blockIdx.z") != 1:
        return None, "its grid spans more than blockIdx.x"
    if band.work_items != band.units(kernel):
        return None, "its blocks already walk several tiles"
    if band.work_items <= resident_blocks(kernel):
        return None, f"its {band.work_items} tiles fit on the GPU at once"
    if any(isinstance(c, T.CombineOp) and set(c.over) & set(T.BLOCK_AXES) for c in kernel.walk()):
        return None, "it combines across blocks"
    if any(isinstance(st, T.StageOp) and not st.producer for st in kernel.walk()):
        return None, "a ring its threads fill counts its phases within one tile (only a producer warp's go on)"
    return band, ""
