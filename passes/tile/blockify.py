from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.tile.algebra import contractions_in
from irforge.passes.tile.heuristics import THREAD_CHOICES, TILE_CHOICES, heuristic
from irforge.passes.tile.rewrites import collapse_into, tile_loop

from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option
from irforge.target import target


class TileBlockify(Pass):
    """Split parallel loops into blocks x threads.

    Three moves, each recognised as done from the IR (a loop already on a thread axis is left alone):

    - a band whose points are the outputs of a contraction (`irforge.dialects.tile.algebra`) is cut into output
      tiles of `bm` x `bn` points (along its innermost M and N dimensions), a block per tile, the tile's points a
      loop over `threads` threads along x: the block's threads share the rows of A and columns of B the tile
      reads; where a reduction computes A in the element (attention's scores) and `lanes` threads share a row,
      the rows go along y and the lanes along x (`by threadIdx.y, threadIdx.x`), so that tile-register-tile can
      give each lane a share of the row's columns, and the lanes the row's scores to share;
    - a free loop inside a block's point (under a band, or a loop that shares a reduction) goes on threadIdx.x
      when the block already has threads there that no enclosing loop uses: the threads take its iterations in
      turn (the write-back loop after a cooperative reduction);
    - a band (a loop on block axes only) is split over one more thread axis, `threads` of them: the first of x, y,
      z that neither an enclosing loop nor anything inside it uses (y under a cooperative reduction on x: several
      rows per block). The grid shrinks to match. A band holding a `tile.stage` keeps its point per block.

    `threads` is the block size along the new axis; 0 asks passes/tile/heuristics.py, 1 leaves bands alone; so
    do `bm` and `bn` (1: that dimension is not tiled).
    """

    name = "tile-blockify"
    input_level = "tile"
    anchor = "kernel"
    threads: int = option(
        0,
        domain=Choices(THREAD_CHOICES),
        help="threads per block along the axis a band is split over (0: from the band's shape, by "
        "passes/tile/heuristics.py; 1: bands stay one point per block)",
    )
    bm: int = option(
        0, domain=Choices(TILE_CHOICES), help="rows (M) of a contraction's output tile per block (0: heuristic)"
    )
    bn: int = option(
        0, domain=Choices(TILE_CHOICES), help="columns (N) of a contraction's output tile per block (0: heuristic)"
    )
    lanes: int = option(
        0,
        domain=Choices(THREAD_CHOICES[:7]),
        help="threads along x sharing each row of a contraction whose A factor a reduction computes (attention's "
        "scores), rows along y (0: heuristic; 1: a thread per row)",
    )

    def check(self, op: Operation) -> str | None:
        if not isinstance(op, T.KernelOp):
            return None
        for band, inner, m_dim, n_dim in _contraction_bands(op):
            extents = band.extents + (inner.extents if inner is not None else ())
            for name, size, d in (("bm", self.bm, m_dim), ("bn", self.bn, n_dim)):
                if size > 1 and extents[d] % size:
                    return f"{name}={size} does not divide the contraction's {extents[d]} outputs along it"
        if self.threads <= 1:
            return None
        for band, axis in _band_splits(op, _inner_free_loops(op)):
            size = op.axis_size(axis)
            if size == 1 and op.threads * self.threads > target().max_threads:
                n = op.threads * self.threads
                return f"threads={self.threads} would give the block {n} threads (the limit is {target().max_threads})"
            n = self.threads if size == 1 else size
            if axis != "threadIdx.x" and _holds_collectives(band) and band.work_items % n:
                return (
                    f"threads={self.threads} does not divide the band's {band.work_items} points; the combines inside "
                    "need every row of the block busy on every trip"
                )
        return None

    def _why_one(self) -> str:
        return "threads=1" if self.threads else "the default schedule's choice"

    def run(self, op: Operation) -> None:
        for band, inner, m_dim, n_dim in _contraction_bands(op):
            if inner is not None:
                band = collapse_into(band, inner)
            _tile_contraction(op, band, m_dim, n_dim, self)
        inner = _inner_free_loops(op)
        splits = _band_splits(op, inner)
        for loop in inner:
            loop.attributes["bind"] = ("threadIdx.x",)
            self.remark(loop, f"the block's {op.axis_size('threadIdx.x')} threads along x take the loop's iterations")
        for band, axis in splits:
            size = op.axis_size(axis)
            if size == 1:
                size = self.threads or heuristic().band_threads(op, band, axis)
                if size == 1:
                    self.remark(
                        band, f"the band of {band.work_items} points stays one point per block ({self._why_one()})"
                    )
                    continue
                if op.threads * size > target().max_threads:
                    self.remark(
                        band,
                        f"not split: {size} threads would give the block {op.threads * size} (the limit is "
                        f"{target().max_threads})",
                    )
                    continue
                op.set_axis_size(axis, size)
            band.attributes["bind"] = (*band.bind, axis)
            self.remark(band, f"the band of {band.work_items} points is split over {size} threads along {axis}")
        T.fit_grid(op)


def _contraction_bands(kernel: T.KernelOp) -> list[tuple[T.ForOp, T.ForOp | None, int, int]]:
    """(band, inner loop, M dimension, N dimension) of every band whose points are a contraction's outputs and that is
    not cut into tiles yet (nothing inside it on threads), in a kernel with no threads sized yet. With an inner loop,
    the outputs' dimensions are the band's and that loop's (attention's P @ V: the band over query rows, its
    softmax statistics, then a loop over the head dimension): collapsing it into the band (`collapse_into`) makes
    them one band, the dimensions numbered so."""
    if kernel.threads > 1:
        return []
    out = []
    for band in kernel.walk():
        if not _is_band(band) or band.vector > 1 or T.axes_used_within(band) - {*band.bind} or _holds_collectives(band):
            continue
        inner = _collapsible(band)
        ivs = band.ivs + (inner.ivs if inner is not None else [])
        for c in contractions_in(band):
            m = [d for d, iv in enumerate(ivs) if iv in c.m]
            n = [d for d, iv in enumerate(ivs) if iv in c.n]
            if m and n:
                out.append((band, inner, m[-1], n[-1]))
                break
    return out


def _collapsible(band: T.ForOp) -> T.ForOp | None:
    """The one free loop in the band's body whose indices a contraction's outputs need, when everything else in the
    body is pure and before it (so it can run per point of the loop: per thread, its points' share)."""
    loops = [op for op in band.body.ops if isinstance(op, T.ForOp)]
    if len(loops) != 1 or loops[0].bind or loops[0].vector > 1:
        return None
    inner = loops[0]
    rest = band.body.ops[: band.body.ops.index(inner)]
    after = band.body.ops[band.body.ops.index(inner) + 1 :]
    if after or not all(op.has_trait("pure") for op in rest):
        return None
    c_ivs = {iv for c in contractions_in(inner) for iv in c.m + c.n}
    return inner if set(inner.ivs) & c_ivs else None


def _tile_contraction(kernel: T.KernelOp, band: T.ForOp, m_dim: int, n_dim: int, p: TileBlockify) -> None:
    recomputes_a = any(c.a_reduction is not None for c in contractions_in(band))
    lanes = (p.lanes or heuristic().row_lanes(kernel, band, m_dim, n_dim)) if recomputes_a else 1
    if lanes > 1 and band.extents[n_dim] % lanes == 0:
        _tile_shared_rows(kernel, band, m_dim, n_dim, lanes, p)
        return
    bm, bn, threads = heuristic().contraction_tile(kernel, band, m_dim, n_dim)
    bm, bn, threads = p.bm or bm, p.bn or bn, p.threads or threads
    if bm == 1 and bn == 1:
        return
    sizes = [1] * len(band.extents)
    sizes[m_dim], sizes[n_dim] = bm, bn
    threads = min(threads, bm * bn, target().max_threads)
    tile_loop(band, tuple(sizes), inner_bind=("threadIdx.x",))
    kernel.set_axis_size("threadIdx.x", threads)


def _tile_shared_rows(kernel: T.KernelOp, band: T.ForOp, m_dim: int, n_dim: int, lanes: int, p: TileBlockify) -> None:
    """A block per tile of `bm` rows and all of N, its rows along threadIdx.y and `lanes` threads along x sharing
    each row: once tile-register-tile gives each lane its N / lanes columns, the lanes of a row differ in nothing
    but those columns, so they can share the row's A reduction (the scores)."""
    bm, threads = heuristic().attention_tile(kernel, band, m_dim, n_dim, lanes)
    bm = p.bm or bm
    rows = min(bm, max(1, (p.threads or threads) // lanes), target().max_threads // lanes)
    sizes = [1] * len(band.extents)
    sizes[m_dim], sizes[n_dim] = bm, band.extents[n_dim]
    tile_loop(band, tuple(sizes), inner_bind=("threadIdx.y", "threadIdx.x"))
    kernel.set_axis_size("threadIdx.x", lanes)
    kernel.set_axis_size("threadIdx.y", rows)
    p.remark(band, f"each of a block's {rows} rows is shared by {lanes} threads along x (its columns and scores)")


def _tiles_contraction(band: T.ForOp) -> bool:
    """Whether the band's points are tiles of a contraction's outputs (a thread loop inside computes them)."""
    return any(
        isinstance(lp, T.ForOp) and any(a in T.THREAD_AXES for a in lp.bind) and contractions_in(lp)
        for lp in band.walk()
    )


def _is_band(loop) -> bool:
    return isinstance(loop, T.ForOp) and bool(loop.bind) and all(a in T.BLOCK_AXES for a in loop.bind)


def _inner_free_loops(kernel: T.KernelOp) -> list[T.ForOp]:
    """The outermost free loops not distributed yet, where threadIdx.x has threads (several) that nothing around
    or inside them uses."""
    out: list[T.ForOp] = []
    if kernel.axis_size("threadIdx.x") == 1:
        return out
    for loop in kernel.walk():
        if not isinstance(loop, T.ForOp) or loop.bind or any(o.is_ancestor_of(loop) for o in out):
            continue
        if "threadIdx.x" not in T.bound_axes(loop) | T.axes_used_within(loop):
            out.append(loop)
    return out


def _band_splits(kernel: T.KernelOp, inner: list[T.ForOp]) -> list[tuple[T.ForOp, str]]:
    """(band, thread axis) for every band that can take one more thread axis, once the `inner` loops are on
    threadIdx.x."""
    out = []
    for band in kernel.walk():
        if not _is_band(band) or any(isinstance(x, T.StageOp) for x in band.walk()) or _tiles_contraction(band):
            continue
        taken = T.bound_axes(band) | T.axes_used_within(band)
        if any(band.is_ancestor_of(lp) for lp in inner):
            taken.add("threadIdx.x")
        axis = next((a for a in T.THREAD_AXES if a not in taken), None)
        if axis is not None:
            out.append((band, axis))
    return out


def _holds_collectives(loop: T.LoopOp) -> bool:
    return any(isinstance(x, (T.CombineOp, T.StageOp)) for x in loop.walk())
