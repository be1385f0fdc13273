from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.tile import vectors
from irforge.passes.tile.heuristics import heuristic

from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option


class TilePermuteLanes(Pass):
    """Lay out a register-tiled loop's points over lanes and threads so a warp's shared-memory reads and global
    stores do not conflict.

    Along a dimension whose lanes are the contiguous run of a shared-memory read or a store, a thread's `V` points
    become `V / g` groups of `g` (16 bytes), the groups `E / (V / g)` apart (`split`): neighbouring threads' 16-byte
    accesses then sit next to each other (a warp's 32 loads in 4 wavefronts, its stores in full sectors) instead of
    `V` elements apart. Then the threads' work items are ordered in groups of `rows` along the first of the last two
    dimensions (`raster`): a warp covers `rows` x `32 / rows` register tiles, so it reads fewer distinct operand
    elements per step (4 x 8 tiles of 8 x 8: 32 rows of A and 64 columns of B instead of 16 and 128). Both are
    bijections of a free loop's iterations: the answer does not change. A loop whose threads along its last axis
    share each point's work (an attention row's lanes: a reduction over that axis inside, a combine over it) takes
    no raster, which would spread them over rows. A loop with a split or a raster is left alone (idempotent).
    """

    name = "tile-permute-lanes"
    input_level = "tile"
    anchor = "kernel"
    rows: int = option(
        0, domain=Choices((0, 1, 2, 4, 8, 16)), help="work items per group down the rows (0: heuristic; 1: none)"
    )
    group_bytes: int = option(
        0,
        domain=Choices((0, 4, 8, 16, 32)),
        help="bytes a lane group spans (0: 16, a vector access; 4: groups of one 4-byte element, the finest split)",
    )

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp):
            return
        for loop in _candidates(op):
            _split(loop, self.group_bytes or 16)
            rows = self.rows or heuristic().warp_rows(op, loop)
            grid = loop.layout.work_grid
            if rows > 1 and len(grid) >= 2 and grid[-2] % rows == 0 and grid[-1] > 1:
                if _cooperates_along(loop, loop.bind[-1]):
                    self.remark(
                        loop, f"no raster: its threads along {loop.bind[-1]} share work, which needs them on one row"
                    )
                else:
                    loop.attributes["raster"] = rows


def _candidates(kernel: T.KernelOp) -> list[T.ForOp]:
    """Register-tiled loops on thread axes not laid out yet."""
    return [
        lp
        for lp in kernel.walk()
        if isinstance(lp, T.ForOp)
        and lp.vector > 1
        and any(a in T.THREAD_AXES for a in lp.bind)
        and "split" not in lp.attributes
        and "raster" not in lp.attributes
    ]


def _cooperates_along(loop: T.ForOp, axis: str) -> bool:
    """Whether the loop's threads along `axis` work together on each of its points (a reduction distributed over
    `axis` again, a combine over it): a raster would give them different points."""
    return any(
        (isinstance(o, T.ReduceOp) and axis in o.bind) or (isinstance(o, T.CombineOp) and axis in o.over)
        for o in loop.walk()
        if o is not loop
    )


def _split(loop: T.ForOp, group_bytes: int) -> None:
    """Split the dimensions that are the contiguous run of an access in the loop into lane groups of
    `group_bytes`."""
    runs = _run_dims(loop)
    split = [1] * len(loop.extents)
    for d, w in enumerate(loop.vector_shape):
        nbytes = runs.get(d)
        if nbytes is None or w * nbytes <= group_bytes:
            continue
        g = w // max(1, group_bytes // nbytes)
        if g > 1 and w % g == 0 and loop.extents[d] % g == 0:
            split[d] = g
    if any(g > 1 for g in split):
        loop.attributes["split"] = tuple(split)
        if loop.layout.why_not() or vectors.why_not(loop):
            del loop.attributes["split"]


def _run_dims(loop: T.ForOp) -> dict[int, int]:
    """{dimension: element bytes} of the loop's dimensions along which a load or a store is contiguous (a global
    load's slab is staged with its rows, so its reads from shared memory run the same way)."""
    out = {}
    for acc in loop.walk():
        if not isinstance(acc, (T.LoadOp, T.StoreOp)):
            continue
        offset = vectors.flat_offset(acc)
        for d, iv in enumerate(loop.ivs):
            if loop.vector_shape[d] > 1 and vectors.coefficient(offset, iv) == 1:
                out[d] = max(out.get(d, 0), acc.operands[0].type.dtype.bytes)
    return out
