"""How a tile loop deals its iterations to units and lanes: the one definition the interpreter, the materializer
and the passes share (docs/dialects/tile.md, "Distributed loops").

A loop over `extents` (E_0, ..., E_n-1) takes work items of `vector` (V_0, ..., V_n-1) iterations: a box of V_d
consecutive indices along each dimension (`vector 4` is (1, ..., 1, 4)). With `split` (G_0, ...), the V_d lanes
along dimension d form G_d groups of V_d / G_d consecutive indices, the groups E_d / G_d apart (a thread's 8 rows
as two runs of 4, 64 rows apart: conflict-free shared-memory reads). Work items are numbered row-major over the
work grid (W_d = E_d / V_d), except that `raster` R regroups the last two dimensions: consecutive work items go
down R rows of the grid before moving along it (blocks that share operand tiles run together: L2 reuse). Every
choice is a bijection of the iteration space, so none changes what a free loop computes.

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
        if len(self.vector) != len(self.extents) or len(self.split) != len(self.extents):
            return f"needs one vector width and one split per dimension ({len(self.extents)})"
        for d, (e, v, g) in enumerate(zip(self.extents, self.vector, self.split)):
            if v < 1 or g < 1:
                return f"vector and split must be positive, got {v} and {g} along dimension {d}"
            if e % v:
                return f"vector {v} does not divide the extent {e} of dimension {d}"
            if v % g or e % g:
                return f"split {g} does not divide the vector {v} and the extent {e} of dimension {d}"
        if self.raster > 1:
            if len(self.extents) < 2:
                return "raster regroups the last two dimensions; the loop has one"
            if self.work_grid[-2] % self.raster:
                return f"raster {self.raster} does not divide the {self.work_grid[-2]} work items along dimension -2"
        return None

    def work_coords(self, w):
        """The work-grid coordinates (one per dimension) of work item number `w`."""
        grid = self.work_grid
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
        run = self.groups_len[d]
        seg = self.extents[d] // self.split[d]
        if self.split[d] == 1:
            return w_d * run + lane
        return (lane // run) * seg + w_d * run + lane % run

    def lane_offset(self, d: int, lane: int) -> int:
        """Iteration offset of lane `lane` from lane 0 along dimension `d` (a constant)."""
        run = self.groups_len[d]
        return (lane // run) * (self.extents[d] // self.split[d]) + lane % run


def _delinearize(w, grid) -> list:
    out = []
    for k, n in enumerate(grid):
        inner = math.prod(grid[k + 1 :])
        x = w // inner if inner != 1 else w
        out.append(x % n if k > 0 else x)
    return out
