from __future__ import annotations

import math

from irforge.dialects import tile as T
from irforge.dialects.tile.layout import Layout
from irforge.dialects.tile.vectors import expand, uses
from irforge.passes.tile import banks_layouts
from irforge.passes.tile.heuristics import RASTER_IN_L2, RASTER_MIN_SAVING, RASTER_ROWS, heuristic

from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option
from irforge.target import target

MAX_WAVES = 16  # waves of blocks the model follows (the order repeats its pattern past them)


class TileRasterize(Pass):
    """Order a band's blocks in groups of rows, so that the blocks running together share operand slabs in L2.

    A band on block axes whose last two dimensions index different operands (a contraction's M and N tiles: A's
    slabs along one, B's along the other) gets `raster R`: consecutive blocks go down R rows of the grid of tiles
    before moving along it (`irforge.dialects.tile.layout`), so a wave of W resident blocks reads about R A-slabs
    and W / R B-slabs instead of one A-slab row and W B-slabs.

    The model that picks R (`rows=0`): the blocks run in waves of `sm_count x blocks per SM` (limited by threads,
    shared memory and an estimate of registers); every operand a block reads (a buffer, indexed by some of the
    band's dimensions) comes from DRAM once per wave for each distinct slab the wave's blocks read (a slab: the
    part of the buffer one value of those dimensions reaches, its bytes the buffer's over the number of values),
    and nothing survives from one wave to the next. R is the candidate of passes/tile/heuristics.py with the
    fewest DRAM bytes over the first waves, the smaller on a tie, and row order unless it saves RASTER_MIN_SAVING
    of row order's bytes, else the largest candidate up to RASTER_IN_L2 that reads no more than row order (grouped
    rows measured faster where the model sees no difference). When all the band's operands fit the L2 the model
    counts on, every order reads them once from DRAM, and R is the largest candidate up to RASTER_IN_L2. Each
    decision is a remark. A band with a raster is left alone (idempotent); the order changes no value.
    """

    name = "tile-rasterize"
    input_level = "tile"
    anchor = "kernel"
    rows: int = option(
        0, domain=Choices((0, *RASTER_ROWS)), help="rows of blocks per group (0: the L2 model decides; 1: row order)"
    )

    def check(self, op: Operation) -> str | None:
        if not isinstance(op, T.KernelOp) or self.rows <= 1:
            return None
        for band in candidates(op):
            rows = band.layout.work_grid[-2]
            if rows % self.rows:
                return f"rows={self.rows} does not divide the {rows} rows of blocks of the band"
        return None

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp) or self.rows == 1:
            return
        for band in candidates(op):
            rows = self.rows
            if not rows:
                rows, why = choose(op, band)
                self.remark(band, why)
            if rows > 1:
                band.attributes["raster"] = rows


def candidates(kernel: T.KernelOp) -> list[T.ForOp]:
    """Bands on block axes only, of two or more dimensions, not rastered yet, whose last two dimensions index
    different operands (the reuse a block order can win)."""
    out = []
    for band in kernel.walk():
        if not isinstance(band, T.ForOp) or not band.bind or "raster" in band.attributes:
            continue
        if any(a not in T.BLOCK_AXES for a in band.bind) or len(band.extents) < 2 or band.vector > 1:
            continue
        dims = [used for _, used in operands(band).values()]
        if any(used & {len(band.extents) - 2} and not used & {len(band.extents) - 1} for used in dims) and any(
            used & {len(band.extents) - 1} and not used & {len(band.extents) - 2} for used in dims
        ):
            out.append(band)
    return out


def operands(band: T.ForOp) -> dict:
    """{buffer: (bytes, band dimensions its reads' subscripts use)} for the function buffers the band reads."""
    out: dict = {}
    for op in band.walk():
        if not isinstance(op, (T.LoadOp, T.StageOp)) or isinstance(op.operands[0].owner, T.StageOp):
            continue
        buf = op.operands[0]
        exprs = [expand(e) for e in op.index_exprs()]
        used = {d for d, iv in enumerate(band.ivs) if any(uses(e, iv) for e in exprs)}
        nbytes = buf.type.numel * buf.type.dtype.bytes
        out[buf] = (nbytes, out.get(buf, (0, set()))[1] | used)
    return out


def choose(kernel: T.KernelOp, band: T.ForOp) -> tuple[int, str]:
    """(R, why): the model's group of rows for the band (the class docstring)."""
    ops = operands(band)
    total = sum(b for b, _ in ops.values())
    l2 = heuristic().l2_bytes()
    if total <= l2:
        rows = max(r for r in (1, *heuristic().raster_candidates(kernel, band)) if r <= RASTER_IN_L2)
        return rows, f"raster {rows}: its operands ({total} bytes) fit the {l2} bytes of L2 the model counts on"
    wave = target().sm_count * blocks_per_sm(kernel)
    costs = {r: dram_bytes(band, ops, r, wave) for r in heuristic().raster_candidates(kernel, band)}
    best = min(costs, key=lambda r: (costs[r], r))
    if 1 in costs and costs[best] > (1 - RASTER_MIN_SAVING) * costs[1]:
        # A saving within the model's error is no reason to reorder; groups of up to RASTER_IN_L2 rows that read
        # no more than row order are taken all the same (as where the operands fit the L2).
        best = max(r for r in costs if r <= RASTER_IN_L2 and costs[r] <= costs[1])
    table = ", ".join(f"{r}: {c / 1e6:.1f} MB" for r, c in costs.items())
    return best, f"raster {best}: waves of {wave} blocks read {table} of operands from DRAM (first {MAX_WAVES} waves)"


def dram_bytes(band: T.ForOp, ops: dict, rows: int, wave: int) -> int:
    """Operand bytes the first waves of `wave` blocks read from DRAM with the band's blocks in groups of `rows`."""
    import numpy as np

    lay = band.layout
    layout = Layout(lay.extents, lay.vector, lay.split, rows)
    grid = layout.work_grid
    total = 0
    for start in range(0, min(layout.work_items, MAX_WAVES * wave), wave):
        coords = layout.work_coords(np.arange(start, min(start + wave, layout.work_items)))
        for nbytes, used in ops.values():
            dims = sorted(used)
            slabs = len(set(zip(*(coords[d].tolist() for d in dims)))) if dims else 1
            total += slabs * nbytes // math.prod(grid[d] for d in dims)
    return total


def blocks_per_sm(kernel: T.KernelOp) -> int:
    """Blocks of the kernel an SM holds at once: by threads, by shared memory (its stages), and by registers
    (estimated: 32 per thread plus twice its largest register tile, the accumulator and its operands)."""
    t = target()
    tile = max((lp.vector for lp in kernel.walk() if isinstance(lp, T.ForOp) and lp.vector > 1), default=1)
    regs = min(t.max_registers_per_thread, 32 + 2 * tile) * kernel.threads
    smem = banks_layouts.smem_bytes(kernel)
    fits = [t.max_threads_per_sm // kernel.threads, t.max_blocks_per_sm, t.registers_per_sm // regs]
    if smem:
        fits.append(t.smem_per_sm // smem)
    return max(1, min(fits))
