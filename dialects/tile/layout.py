"""How a tile loop deals its iterations to units and lanes: the one definition the interpreter, the materializer
and the passes share (docs/dialects/tile.md, "Distributed loops").

A loop over `extents` (E_0, ..., E_n-1) takes work items of `vector` (V_0, ..., V_n-1) iterations: a box of V_d
consecutive indices along each dimension (`vector 4` is (1, ..., 1, 4)). With `warps` (P_0, ...), the iteration
space is first cut into P_0 x P_1 x ... equal tiles of T_d = E_d / P_d indices, whose work items are numbered one
tile after another (a tile of 32 work items on threads is one warp's: the warp tile of a tensor-core contraction);
without, the whole space is one tile. With `split` (G_0, ...), the V_d lanes along dimension d form G_d groups of
V_d / G_d consecutive indices, the groups T_d / G_d apart (a thread's 8 rows as two runs of 4, 64 rows apart:
conflict-free shared-memory reads; an mma accumulator's rows g, g + 8, g + 16, ...). Inside a tile, work items are
numbered row-major over its work grid (T_d / V_d), except that `raster` R regroups the last two dimensions:
consecutive work items go down R rows of the grid before moving along it (blocks that share operand tiles run
together: L2 reuse). Every choice is a bijection of the iteration space, so none changes what a free loop
computes.

Formulas take Python ints, numpy arrays or index expressions alike (they use only +, *, // and %).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    extents: tuple[int, ...]
    vector: tuple[int, ...]
    split: tuple[int, ...]
    raster: int = 1
    warps: tuple[int, ...] = ()  # () is one tile

    @property
    def tiles(self) -> tuple[int, ...]:
        """Tiles along each dimension (the `warps` grid; all ones without)."""
        return self.warps or (1,) * len(self.extents)

    @property
    def tile_extents(self) -> tuple[int, ...]:
        return tuple(e // p for e, p in zip(self.extents, self.tiles))

    @property
    def tile_grid(self) -> tuple[int, ...]:
        """Work items along each dimension of one tile."""
        return tuple(t // v if v else 0 for t, v in zip(self.tile_extents, self.vector))

    def group_stride(self, d: int) -> int:
        """Iterations between lane groups along dimension `d` (T_d / G_d)."""
        return self.tile_extents[d] // self.split[d]

    @property
    def groups_len(self) -> tuple[int, ...]:
        """Consecutive indices per lane group along each dimension (V_d / G_d)."""
        return tuple(v // g for v, g in zip(self.vector, self.split))

    @property
    def work_grid(self) -> tuple[int, ...]:
        return tuple(e // v if v else 0 for e, v in zip(self.extents, self.vector))

    @property
    def work_items(self) -> int:
        return math.prod(self.work_grid)

    @property
    def lanes(self) -> int:
        return math.prod(self.vector)

    def why_not(self) -> str | None:
        """Why these numbers are not a layout of the extents (None when they are)."""
        n = len(self.extents)
        if len(self.vector) != n or len(self.split) != n or len(self.tiles) != n:
            return f"needs one vector width, split and warps count per dimension ({n})"
        for d, (e, p) in enumerate(zip(self.extents, self.tiles)):
            if p < 1 or e % p:
                return f"warps {p} does not divide the extent {e} of dimension {d}"
        for d, (e, v, g) in enumerate(zip(self.tile_extents, self.vector, self.split)):
            what = "extent" if not self.warps else "warp tile's extent"
            if v < 1 or g < 1:
                return f"vector and split must be positive, got {v} and {g} along dimension {d}"
            if e % v:
                return f"vector {v} does not divide the {what} {e} of dimension {d}"
            if v % g or e % g:
                return f"split {g} does not divide the vector {v} and the {what} {e} of dimension {d}"
        if self.raster > 1:
            if n < 2:
                return "raster regroups the last two dimensions; the loop has one"
            if self.tile_grid[-2] % self.raster:
                return f"raster {self.raster} does not divide the {self.tile_grid[-2]} work items along dimension -2"
        return None

    def work_coords(self, w):
        """The work-grid coordinates (one per dimension) of work item number `w`."""
        if not self.warps:
            return self._tile_coords(w)
        per = math.prod(self.tile_grid)
        tile = _delinearize(w // per, self.warps)
        inner = self._tile_coords(w % per)
        return [t * g + c if p > 1 else c for t, g, c, p in zip(tile, self.tile_grid, inner, self.warps)]

    def _tile_coords(self, w):
        """Work-grid coordinates inside one tile of work item number `w` of the tile."""
        grid = self.tile_grid
        n = len(grid)
        if self.raster > 1:
            wa, wb, r = grid[-2], grid[-1], self.raster
            inner, lead = (w % (wa * wb), w // (wa * wb)) if n > 2 else (w, 0)
            per_group = r * wb
            in_group = inner % per_group
            tail = [(inner // per_group) * r + in_group % r, in_group // r]
            head = _delinearize(lead, grid[:-2]) if n > 2 else []
            return [*head, *tail]
        return _delinearize(w, grid)

    def index(self, d: int, w_d, lane):
        """Iteration index along dimension `d` of work coordinate `w_d`, lane `lane` (0 <= lane < V_d)."""
        if self.tiles[d] > 1:
            grid = self.tile_grid[d]
            return (w_d // grid) * self.tile_extents[d] + self._tile_index(d, w_d % grid, lane)
        return self._tile_index(d, w_d, lane)

    def _tile_index(self, d: int, w_d, lane):
        run = self.groups_len[d]
        if self.split[d] == 1:
            return w_d * run + lane
        return (lane // run) * self.group_stride(d) + w_d * run + lane % run

    def lane_offset(self, d: int, lane: int) -> int:
        """Iteration offset of lane `lane` from lane 0 along dimension `d` (a constant)."""
        run = self.groups_len[d]
        return (lane // run) * self.group_stride(d) + lane % run


def _delinearize(w, grid) -> list:
    out = []
    for k, n in enumerate(grid):
        inner = math.prod(grid[k + 1 :])
        x = w // inner if inner != 1 else w
        out.append(x % n if k > 0 else x)
    return out
