"""Parse callbacks for the tile dialect's custom syntax (`tile.lark`): each returns the op's generic `OpAST`."""

from __future__ import annotations

from irforge.attributes import UNIT
from irforge.index_expr import AffineMap
from irforge.parser import OpAST, bind_index_values
from irforge.types import index

from ..launch import launch_dims
from .loops import _widths

_LOOP_OPTIONS = ("vector", "split", "warps", "raster", "unroll", "atom")


class TileSyntax:
    def tile_kernel(self, c):
        sym, grid, block, attrs, region = c
        a = {**dict(attrs or {}), "sym_name": sym.name, "grid": launch_dims(grid), "block": launch_dims(block)}
        return OpAST("tile.kernel", attrs=a, result_types=[], regions=[region])

    def tile_ints(self, c):
        return [int(t) for t in c]

    def tile_buffer(self, c):
        return OpAST("tile.buffer", result_types=[c[0]])

    def tile_param(self, c):
        sym, t = c
        return OpAST("tile.param", attrs={"sym": sym}, result_types=[t])

    def tile_ivs(self, c):
        return list(c)

    def tile_ranges(self, c):
        return list(c)

    def tile_range(self, c):
        lo, hi = c
        if int(lo) != 0:
            from irforge.diagnostics import error

            raise error("loops run from 0 (write 0..N and offset the subscripts)", self.loc_of(lo))
        return int(hi)

    def tile_by(self, c):
        return c[0]

    def tile_axes(self, c):
        return tuple(str(t) for t in c)

    def tile_vector(self, c):
        return ("vector", [int(t) for t in c])

    def tile_split(self, c):
        return ("split", tuple(int(t) for t in c))

    def tile_warps(self, c):
        return ("warps", tuple(int(t) for t in c))

    def tile_atom(self, c):
        return ("atom", str(c[0]))

    def tile_raster(self, c):
        return ("raster", int(c[0]))

    def tile_unroll(self, c):
        return ("unroll", int(c[0]))

    def _schedule(self, bind, options, rank: int) -> dict:
        out = {}
        if bind:
            out["bind"] = tuple(bind)
        for key, value in options:
            if key == "vector":
                value = _widths(value[0], rank) if len(value) == 1 else tuple(value)
                if all(w == 1 for w in value):
                    continue
            out[key] = value
        return out

    def tile_for(self, c):
        ivs, extents, bind, *options, attrs, region = c
        if len(ivs) != len(extents):
            from irforge.diagnostics import error

            raise error(f"{len(ivs)} loop indices for {len(extents)} ranges", self.loc_of(ivs[0]))
        sched = self._schedule(bind, [o for o in options if o is not None], len(extents))
        a = {**dict(attrs or {}), "extents": tuple(extents), **sched}
        region = region.with_entry_args([(self.ref(iv), index) for iv in ivs])
        return OpAST("tile.for", attrs=a, result_types=[], regions=[region])

    def tile_reduce(self, c):
        iv, extent, bind, *rest = c
        options, rest = rest[: len(_LOOP_OPTIONS)], rest[len(_LOOP_OPTIONS) :]  # one slot each, None when absent
        carriers = [x for x in rest if isinstance(x, tuple) and len(x) == 2 and isinstance(x[1], tuple)]
        types, attrs, region = rest[len(carriers) :]
        a = {
            **dict(attrs or {}),
            "extent": extent,
            "monoids": tuple(m for m, _ in carriers),
            "init": tuple(i for _, i in carriers),
            **self._schedule(bind, [o for o in options if o is not None], 1),
        }
        region = region.with_entry_args([(self.ref(iv), index)])
        return OpAST("tile.reduce", attrs=a, result_types=types, regions=[region])

    def tile_carrier(self, c):
        return (str(c[0]), tuple(c[1:]))

    def tile_yield(self, c):
        return OpAST("tile.yield", operands=c[0], result_types=[])

    def tile_via(self, c):
        return c[0]

    def tile_combined(self, c):
        return (str(c[0]), list(c[1]))

    def tile_combine(self, c):
        *parts, over, via, types = c
        values = [v for _, vs in parts for v in vs]
        a = {"monoids": tuple(m for m, _ in parts), "widths": tuple(len(vs) for _, vs in parts), "over": over}
        if via is not None:
            a["via"] = str(via)
        return OpAST("tile.combine", operands=values, attrs=a, result_types=types)

    def tile_stage(self, c):
        buf, (m, refs), *options, attrs, t = c
        a = {**dict(attrs or {}), **dict(o for o in options if o is not None), "index": m}
        return OpAST("tile.stage", operands=[self.ref(buf), *refs], attrs=a, result_types=[t])

    def tile_stage_ring(self, c):
        return ("ring", int(c[0]))

    def tile_stage_copy(self, c):
        return ("copy", str(c[0]))

    def tile_stage_producer(self, c):
        return ("producer", UNIT)

    def tile_stage_prefetch(self, c):
        return ("prefetch", int(c[0]))

    def tile_stage_pad(self, c):
        return ("pad", int(c[0]))

    def tile_stage_swizzle(self, c):
        return ("swizzle", tuple(int(t) for t in c))

    def tile_stage_columns(self, c):
        return ("columns", int(c[0]))

    def tile_load(self, c):
        buf, (m, refs) = c
        return OpAST("tile.load", operands=[self.ref(buf), *refs], attrs={"index": m})

    def tile_store(self, c):
        buf, (m, refs), value = c
        return OpAST("tile.store", operands=[self.ref(buf), *refs, value], attrs={"index": m}, result_types=[])

    def tile_index(self, c):
        exprs, refs = bind_index_values([c[0]])
        return OpAST("tile.index", operands=refs, attrs={"expr": AffineMap(len(refs), tuple(exprs))})

    def tile_subscript(self, c):
        exprs, refs = bind_index_values([e for e in c if e is not None])
        return AffineMap(len(refs), tuple(exprs)), refs
