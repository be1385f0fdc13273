"""The tile dialect's loops: `tile.for` and `tile.reduce` with their schedule (the hardware axes a loop is
distributed over, its work items), `tile.yield`, and the axes the loops around an op are distributed over."""

from __future__ import annotations

import math

from irforge.ir import Block, Operation, Region, Value
from irforge.location import UNKNOWN
from irforge.scalar_ops import MONOIDS
from irforge.target import target
from irforge.types import index

from ..loop import indexing
from ..loop.indexing import enclosing_loops, kernel_of
from .layout import Layout
from .program import AXES, BLOCK_AXES, THREAD_AXES, KernelOp, StoreOp, _is_int

# The schedule attributes every loop may carry (docs/dialects/tile.md): `bind` (hardware axes), `vector` and
# `split` (a work item's box of iterations and its lane groups, one number per dimension), `warps` (the iteration
# space cut into tiles numbered one after another), `raster` (grouped order of work items), `unroll` (of the
# materialized loop: 0 fully, N by N), `atom` (the contraction inside runs on tensor cores: `fragments.py`).
SCHEDULE_ATTRIBUTES = {
    "bind": tuple,
    "vector": tuple,
    "split": tuple,
    "warps": tuple,
    "raster": int,
    "unroll": int,
    "atom": str,
}


class LoopOp(indexing.LoopBase):
    """Shared by `tile.for` and `tile.reduce`: an iteration space (one index per dimension, each from 0), optionally
    distributed `by` hardware axes, in work items of `vector` iterations (a box: a width per dimension)."""

    num_regions = 1

    @property
    def bind(self) -> tuple[str, ...]:
        return tuple(self.attributes.get("bind", ()))

    @property
    def vector_shape(self) -> tuple[int, ...]:
        """The work item's widths, one per dimension."""
        return tuple(self.attributes.get("vector", (1,) * len(self.extents)))

    @property
    def vector(self) -> int:
        """Iterations per work item (the product of the widths)."""
        return math.prod(self.vector_shape)

    @property
    def layout(self) -> Layout:
        n = len(self.extents)
        split = tuple(self.attributes.get("split", (1,) * n))
        a = self.attributes
        return Layout(self.extents, self.vector_shape, split, a.get("raster", 1), tuple(a.get("warps", ())))

    @property
    def iterations(self) -> int:
        return math.prod(self.extents)

    @property
    def work_items(self) -> int:
        return self.layout.work_items

    def set_vector(self, widths) -> None:
        """Vectorize by `widths` (one per dimension; all ones removes the attribute)."""
        widths = tuple(widths)
        if any(w != 1 for w in widths):
            self.attributes["vector"] = widths
        else:
            self.attributes.pop("vector", None)

    def units(self, kernel: KernelOp | None = None) -> int:
        """How many units the loop is dealt to (1: it runs whole in each thread)."""
        kernel = kernel or kernel_of(self)
        return math.prod(kernel.axis_size(a) for a in self.bind)

    def one_item_a_unit(self, kernel: KernelOp | None = None) -> bool:
        """Whether every unit runs the loop's body once: one work item each, or a loop laid out on an atom whose
        last warp's lanes past its work items hold ghost rows (the atoms' top half) and run the body all the same."""
        return self.work_items == self.units(kernel) or self.ghost_lanes(kernel) > 0

    def block_uniform(self, kernel: KernelOp) -> bool:
        """Whether all threads of a block make the same trips of the loop, so that a barrier inside is reached by
        all of them or by none: its work items split evenly over its units, or its thread axes come after its block
        axes (a unit is block-major) and their threads divide its work items (a band sharing its launch with a
        larger one: whole blocks have no point of it)."""
        if self.work_items % self.units(kernel) == 0 or self.one_item_a_unit(kernel):
            return True
        threads = [a for a in self.bind if a in THREAD_AXES]
        if any(a in BLOCK_AXES for a in self.bind[self.bind.index(threads[0]) :]):
            return False
        return self.work_items % math.prod(kernel.axis_size(a) for a in threads) == 0

    def ghost_lanes(self, kernel: KernelOp | None = None) -> int:
        """The lanes past the work items of a loop laid out on an atom, in its last warp (a warp's rows on the
        atoms' top half fewer than 8: the lanes of the rows past them run the body and hold no point); 0 else."""
        units, warp = self.units(kernel), target().warp_size
        extra = units - self.work_items
        return extra if "atom" in self.attributes and units % warp == 0 and 0 < extra < warp else 0

    def _verify_loop(self):
        extents = self.extents
        if any(not _is_int(e) or e < 0 for e in extents):
            raise self.error(f"has a negative or non-integer extent in {list(extents)}")
        if 0 in extents:  # the schedule divides loops among threads: a loop that never runs has no place in it
            raise self.error(f"never runs (an extent of 0 in {list(extents)}); loop-dce removes such loops first")
        args = self.body.args
        if len(args) != len(extents) or any(a.type != index for a in args):
            raise self.error(f"needs {len(extents)} block argument(s) of type index (the loop indices)")
        k = kernel_of(self)
        if k is None:
            raise self.error("must be inside a tile.kernel")
        bind = self.attributes.get("bind", ())
        if not isinstance(bind, tuple) or any(a not in AXES for a in bind):
            raise self.error(f"distributes over {', '.join(map(str, bind))}; the axes are {', '.join(AXES)}")
        if len(set(bind)) != len(bind):
            raise self.error("names a hardware axis twice")
        outer = bound_axes(self)
        for a in bind:
            if a in outer and not _shared_by_column(self, a):
                raise self.error(f"distributes over {a}, which an enclosing loop is already distributed over")
        for key in ("vector", "split", "warps"):
            v = self.attributes.get(key, ())
            if not isinstance(v, tuple) or any(not _is_int(x) for x in v):
                raise self.error(f"{key} must be a list of integers, one per dimension, got {v!r}")
        for key in ("raster", "unroll"):
            v = self.attributes.get(key, 1)
            if not _is_int(v) or v < (1 if key == "raster" else 0):
                raise self.error(f"{key} must be a {'positive' if key == 'raster' else 'non-negative'} integer")
        if extents:
            why = self.layout.why_not()
            if why:
                raise self.error(why)
        elif "vector" in self.attributes or "split" in self.attributes:
            raise self.error("a loop without dimensions cannot be vectorized")
        if "atom" in self.attributes:
            self._verify_atom()

    def _verify_atom(self):
        from .fragments import ATOM_FORMS, Atom, acc_layout, why_not_layout

        text = self.attributes["atom"]
        atom = Atom.parse(text) if isinstance(text, str) else None
        if atom is None:
            raise self.error(f"atom {text!r} is not an MMA instruction shape; atoms are {ATOM_FORMS}")
        if not isinstance(self, ForOp):
            raise self.error("only a free loop over a contraction's outputs can be laid out on an atom")
        warps = tuple(self.attributes.get("warps", (1,) * len(self.extents)))
        why = why_not_layout(self.extents, warps, atom)
        if why:
            raise self.error(why)
        want = acc_layout(self.extents, warps)
        if self.layout != want:
            raise self.error(
                f"is laid out on {atom}, so its layout must be the accumulator's: vector {list(want.vector)} split "
                f"{list(want.split)} warps {list(want.warps)}"
            )

    def _print_schedule(self, p):
        if self.bind:
            p.write(" by ", ", ".join(self.bind))
        widths = self.vector_shape
        if any(w != 1 for w in widths[:-1]):
            p.write(f" vector [{', '.join(map(str, widths))}]")
        elif widths and widths[-1] != 1:
            p.write(f" vector {widths[-1]}")
        for key in ("split", "warps"):
            if key in self.attributes:
                p.write(f" {key} [{', '.join(map(str, self.attributes[key]))}]")
        for key in ("raster", "unroll", "atom"):
            if key in self.attributes:
                p.write(f" {key} {self.attributes[key]}")


class ForOp(LoopOp):
    """A free (parallel) loop over one or more dimensions: iterations are independent; its body stores results."""

    name = "tile.for"
    operand_names = ()
    result_names = ()
    attribute_types = {"extents": tuple}
    optional_attributes = SCHEDULE_ATTRIBUTES
    traits = frozenset({"single_block"})
    bind, vector = LoopOp.bind, LoopOp.vector  # the defaults (no axes, 1), not the bare optional attributes

    @staticmethod
    def build(extents, bind=(), vector=1, iv_hints=None, loc=UNKNOWN) -> ForOp:
        attrs = {"extents": tuple(extents)}
        if bind:
            attrs["bind"] = tuple(bind)
        region = Region([Block([index] * len(extents), iv_hints)])
        op = ForOp((), (), attrs, [region], loc)
        op.set_vector(_widths(vector, len(extents)))
        return op

    @property
    def extents(self) -> tuple[int, ...]:
        return tuple(self.attributes["extents"])

    def verify_(self):
        self._verify_loop()
        if not self.extents:
            raise self.error("needs at least one dimension")
        if any(isinstance(a, ReduceOp) for a in self.ancestors()):
            raise self.error("cannot be inside a tile.reduce (a reduction's body only computes its elements)")

    def print_custom(self, p):
        with p.scope():
            p.write("tile.for ", ", ".join(p.define(v) for v in self.ivs), " in ")
            p.write(", ".join(f"0..{e}" for e in self.extents))
            self._print_schedule(p)
            p.attr_dict(self.attributes, elide=("extents", *SCHEDULE_ATTRIBUTES), prefix=" attributes ")
            p.write(" ")
            p.region(self.regions[0], print_entry_args=False)


class ReduceOp(LoopOp):
    """A reduce loop: folds the element its body yields each iteration into carriers, one monoid per carrier (as
    `loop.reduce`). Distributed `by` axes, each unit folds its own work items: the result is that unit's partial
    carrier, which a `tile.combine` over the same axes completes."""

    name = "tile.reduce"
    operand_names = ()
    attribute_types = {"extent": int, "monoids": tuple, "init": tuple}
    optional_attributes = SCHEDULE_ATTRIBUTES
    traits = frozenset({"single_block", "pure"})
    bind, vector = LoopOp.bind, LoopOp.vector

    @staticmethod
    def build(
        extent: int, monoids, init, result_types, bind=(), vector=1, iv_hint=None, result_hints=None, loc=UNKNOWN
    ):
        attrs = {"extent": extent, "monoids": tuple(monoids), "init": tuple(tuple(i) for i in init)}
        if bind:
            attrs["bind"] = tuple(bind)
        region = Region([Block([index], [iv_hint])])
        op = ReduceOp((), list(result_types), attrs, [region], loc, result_hints=result_hints)
        op.set_vector(_widths(vector, 1))
        return op

    @property
    def extents(self) -> tuple[int, ...]:
        return (self.attributes["extent"],)

    @property
    def iv(self) -> Value:
        return self.body.args[0]

    @property
    def carriers(self) -> list[tuple]:
        """[(Monoid, init values, result values)] per carrier."""
        return carriers_of(self.attributes["monoids"], self.attributes["init"], self.results)

    @property
    def yielded(self) -> tuple:
        return self.body.ops[-1].operands

    def verify_(self):
        self._verify_loop()
        indexing.verify_reduction(self, YieldOp, StoreOp)

    def print_custom(self, p):
        carriers = ", ".join(
            f"{m}({', '.join(p.attr(v) for v in init)})"
            for m, init in zip(self.attributes["monoids"], self.attributes["init"])
        )
        with p.scope():
            p.write("tile.reduce ", p.define(self.iv), f" in 0..{self.attributes['extent']}")
            self._print_schedule(p)
            p.write(" ", carriers, " -> ", p.types(r.type for r in self.results))
            p.attr_dict(
                self.attributes, elide=("extent", "monoids", "init", *SCHEDULE_ATTRIBUTES), prefix=" attributes "
            )
            p.write(" ")
            p.region(self.regions[0], print_entry_args=False)


def _widths(vector, rank: int) -> tuple[int, ...]:
    """Per-dimension vector widths from an int (the innermost dimension's) or a tuple."""
    if isinstance(vector, int):
        return (1,) * (rank - 1) + (vector,) if rank else ()
    return tuple(vector)


def carriers_of(monoids, widths_or_init, values) -> list[tuple]:
    """[(Monoid, init-or-width, values)] per carrier, splitting `values` by each carrier's width."""
    out, at = [], 0
    for name, w in zip(monoids, widths_or_init):
        n = len(w) if isinstance(w, tuple) else w
        out.append((MONOIDS[name], w, tuple(values[at : at + n])))
        at += n
    return out


class YieldOp(Operation):
    """Ends a tile.reduce body: the element this iteration contributes (one value per carrier component)."""

    name = "tile.yield"
    operand_names = ("*values",)
    result_names = ()
    num_regions = 0
    traits = frozenset({"terminator"})

    def verify_(self):
        if not isinstance(self.parent_op, ReduceOp):
            raise self.error("must end a tile.reduce body")

    def print_custom(self, p):
        if self.attributes:
            return p.print_generic(self)
        p.write("tile.yield ", p.values(self.operands))


def _shared_by_column(op: Operation, axis: str) -> bool:
    from .columns import shared_by_column  # it builds on this module

    return shared_by_column(op, axis)


def bound_axes(op: Operation) -> set[str]:
    """Hardware axes the loops around `op` are distributed over."""
    return {a for lp in enclosing_loops(op) for a in lp.bind}
