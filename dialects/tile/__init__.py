"""The `tile` dialect: the GPU schedule of each kernel (docs/dialects/tile.md).

    func.func @forward(%x: f32[1,32,2048]) -> f32[1,32,2048] {
      %w = tile.param @rms_norm.weight : f32[2048]
      %y = tile.buffer f32[1,32,2048]
      tile.kernel @k_rms_norm grid(32) block(256) {
        tile.for %a1 in 0..32 by blockIdx.x {                          // block b takes row b
          %x_smem = tile.stage %x[0, %a1, 0] -> smem : f32[1,1,2048]    // the row, copied once into shared memory
          %part = tile.reduce %r2 in 0..2048 by threadIdx.x vector 4 add(0.0) -> f32 {   // thread-strided
            %v = tile.load %x_smem[0, 0, %r2]
            %sq = scalar.mul %v, %v : f32
            tile.yield %sq
          }
          %sum = tile.combine add(%part) over threadIdx.x : f32          // warp shuffles + shared-memory tree
          ...
          tile.for %a2 in 0..2048 by threadIdx.x vector 4 { ... tile.store %y[0, %a1, %a2] = %o }
        }
      }
      func.return %y
    }

The program structure is the loop level's (a function of kernels that read and write buffers in order); what this
level adds is *where* each loop runs. Every thread of every block runs the kernel body, as in CUDA; a loop may be
distributed `by` hardware axes (`blockIdx.x|y|z`, `threadIdx.x|y|z`): its iteration space, in work items of `vector`
consecutive iterations along the innermost dimension, is dealt round-robin to the units those axes number (unit `u`
runs work items `u, u + P, u + 2P, ...`, P the product of the axes' launch sizes), so any launch size stays correct.
A loop without `by` runs whole in every thread that reaches it. `tile.combine` folds the reduction carriers of the
threads that differ only along its axes (every one of them receives the result); `tile.stage` copies a box of a
buffer into the block's shared memory. A store happens once per point: in the thread whose index is 0 along every
launch axis (of size > 1) that no enclosing loop is distributed over.

The reference interpreter (`interpreter.py`) executes exactly these semantics on numpy.
"""

from __future__ import annotations

import math

from irforge.attributes import UNIT, SymbolRef
from irforge.dialect import Dialect, grammar_file
from irforge.index_expr import AffineMap
from irforge.ir import Block, Operation, OpResult, Region, Value
from irforge.location import UNKNOWN
from irforge.parser import OpAST, bind_index_values
from irforge.scalar_ops import MONOIDS
from irforge.target import target
from irforge.types import TensorType, index

from ..launch import dims_text, launch_dims
from ..loop import indexing
from ..loop.indexing import enclosing_loops, kernel_of
from .layout import Layout

BLOCK_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_AXES = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
AXES = BLOCK_AXES + THREAD_AXES


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# ---- program structure ----------------------------------------------------------------------------------------
class KernelOp(indexing.KernelBase):
    """One kernel and its launch shape: `grid` blocks of `block` threads (x, y, z). Pipelines reach it as
    `kernel(...)`; a `tune = {pass-name = {option = value}}` attribute overrides the tile passes' options."""

    name = "tile.kernel"
    operand_names = ()
    result_names = ()
    attribute_types = {"sym_name": str, "grid": tuple, "block": tuple}
    num_regions = 1
    traits = frozenset({"single_block", "no_terminator"})
    anchor_aliases = ("kernel",)

    @staticmethod
    def build(name: str, grid=(1, 1, 1), block=(1, 1, 1), loc=UNKNOWN, attributes=None) -> KernelOp:
        attrs = {**(attributes or {}), "sym_name": name, "grid": tuple(grid), "block": tuple(block)}
        return KernelOp((), (), attrs, [Region([Block()])], loc)

    @property
    def sym_name(self) -> str:
        return self.attributes["sym_name"]

    def axis_size(self, axis: str) -> int:
        """The launch size along a hardware axis (`blockIdx.y` -> grid y)."""
        group, dim = axis.split(".")
        return self.attributes["grid" if group == "blockIdx" else "block"]["xyz".index(dim)]

    def set_axis_size(self, axis: str, size: int) -> None:
        group, dim = axis.split(".")
        key = "grid" if group == "blockIdx" else "block"
        dims = list(self.attributes[key])
        dims["xyz".index(dim)] = size
        self.attributes[key] = tuple(dims)

    @property
    def threads(self) -> int:
        return math.prod(self.attributes["block"])

    def stored_buffers(self) -> list:
        """Buffers this kernel writes, in order of first store."""
        return list(dict.fromkeys(op.buffer for op in self.walk() if isinstance(op, StoreOp)))

    def read_buffers(self) -> list:
        """Function-level buffers this kernel reads (loads and stages), in order of first read."""
        reads = (op.operands[0] for op in self.walk() if isinstance(op, (LoadOp, StageOp)))
        return list(dict.fromkeys(v for v in reads if not _is_stage(v)))

    def verify_(self):
        from irforge.builtin import FuncOp

        if not isinstance(self.parent_op, FuncOp):
            raise self.error("must be directly inside a func.func")
        for other in self.parent.ops:
            if other is self:
                break
            if isinstance(other, KernelOp) and other.sym_name == self.sym_name:
                raise self.error(f"redefines kernel '@{self.sym_name}'", notes=[("first defined here", other.loc)])
        for what in ("grid", "block"):
            dims = self.attributes[what]
            if len(dims) != 3 or any(not _is_int(d) or d <= 0 for d in dims):
                raise self.error(f"'{what}' must be 1 to 3 positive integers, got {list(dims)}")
        limit = target().max_threads
        if self.threads > limit:
            raise self.error(f"has {self.threads} threads per block; the limit is {limit}")
        written = set()
        for op in self.walk():
            if isinstance(op, StoreOp):
                buf = op.buffer
                if not (isinstance(buf, OpResult) and isinstance(buf.op, BufferOp)):
                    raise op.error("writes a function argument or param; inputs and params are read-only")
                written.add(buf)
        for op in self.walk():
            if isinstance(op, (LoadOp, StageOp)) and op.operands[0] in written:
                raise op.error("reads a buffer its own kernel writes; a kernel's reads must not see its stores")

    def print_custom(self, p):
        a = self.attributes
        p.write("tile.kernel ", str(SymbolRef(self.sym_name)))
        p.write(" grid(", dims_text(a["grid"]), ") block(", dims_text(a["block"]), ")")
        p.attr_dict(a, elide=("sym_name", "grid", "block"), prefix=" attributes ")
        p.write(" ")
        p.region(self.regions[0])


class BufferOp(indexing.BufferValueOp):
    """A buffer the program allocates: an intermediate, or an output when the function returns it."""

    name = "tile.buffer"


class ParamOp(indexing.ParamValueOp):
    """A named, read-only buffer whose value lives in the program's param store (a weight)."""

    name = "tile.param"


# ---- loops -----------------------------------------------------------------------------------------------------
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


# How a combine over a block axis is materialized: `atomics` (each block adds its share of the stored values into
# the output), `partials` (each block stores its partial carrier, a second kernel folds them), `cluster` (the
# blocks, one thread block cluster, fold their carriers through distributed shared memory). Without `via`, atomics
# where they can, else partials.
COMBINE_VIAS = ("atomics", "partials", "cluster")


class CombineOp(Operation):
    """The cross-thread combine of reduction carriers: the threads that differ only along the `over` axes fold
    their carriers with each carrier's monoid, and every one of them gets the result. All of them must reach it.
    Over a block axis (a reduction split across blocks), `via` says how it is materialized."""

    name = "tile.combine"
    operand_names = ("*values",)
    attribute_types = {"monoids": tuple, "widths": tuple, "over": tuple}
    optional_attributes = {"via": str}
    num_regions = 0
    traits = frozenset({"pure"})

    @staticmethod
    def build(monoids, widths, values, over, loc=UNKNOWN, result_hints=None) -> CombineOp:
        attrs = {"monoids": tuple(monoids), "widths": tuple(widths), "over": tuple(over)}
        return CombineOp(list(values), [v.type for v in values], attrs, loc=loc, result_hints=result_hints)

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        return list(operand_types)

    @property
    def over(self) -> tuple[str, ...]:
        return tuple(self.attributes["over"])

    @property
    def carriers(self) -> list[tuple]:
        """[(Monoid, width, operand values)] per carrier."""
        return carriers_of(self.attributes["monoids"], self.attributes["widths"], self.operands)

    def verify_(self):
        monoids, widths, over = self.attributes["monoids"], self.attributes["widths"], self.attributes["over"]
        if not monoids or len(widths) != len(monoids) or any(not _is_int(w) for w in widths):
            raise self.error("needs at least one monoid, and one width (its number of components) per monoid")
        indexing.verify_carriers(self, monoids, widths, [v.type for v in self.operands])
        if [r.type for r in self.results] != [v.type for v in self.operands]:
            raise self.error("results must have the types of the combined values")
        if not over or any(a not in AXES for a in over) or len(set(over)) != len(over):
            raise self.error(f"combines over {', '.join(map(str, over))}; name distinct axes among {', '.join(AXES)}")
        if kernel_of(self) is None:
            raise self.error("must be inside a tile.kernel")
        via = self.attributes.get("via")
        if via is not None and (via not in COMBINE_VIAS or len(over) != 1 or over[0] not in BLOCK_AXES):
            raise self.error(f"via {via!r}: a combine over one block axis goes via {' or '.join(COMBINE_VIAS)}")
        outer = bound_axes(self)
        for a in over:
            if a in outer and not _shared_by_column(self, a):
                raise self.error(
                    f"combines over {a}, but an enclosing loop is distributed over it (its threads hold different "
                    "points)"
                )

    def print_custom(self, p):
        parts = [f"{m.name}({p.values(vals)})" for m, _, vals in self.carriers]
        p.write("tile.combine ", ", ".join(parts), " over ", ", ".join(self.over))
        if "via" in self.attributes:
            p.write(f" via {self.attributes['via']}")
        p.attr_dict(self.attributes, elide=("monoids", "widths", "over", "via"))
        p.write(" : ", p.types(r.type for r in self.results))


# ---- memory and indices ----------------------------------------------------------------------------------------
def _is_stage(v: Value) -> bool:
    return isinstance(v, OpResult) and isinstance(v.op, StageOp)


def _is_function_buffer(v: Value) -> bool:
    from irforge.builtin import FuncOp

    if isinstance(v, OpResult):
        return isinstance(v.op, (BufferOp, ParamOp))
    owner = v.owner
    return owner.parent is not None and isinstance(owner.parent.parent, FuncOp)


# How a stage is materialized (docs/dialects/tile.md, "Stages"): none of these changes what the loads of the copy see.
STAGE_ATTRIBUTES = {
    "ring": int,
    "copy": str,
    "producer": type(UNIT),
    "prefetch": int,
    "pad": int,
    "swizzle": tuple,
    "columns": int,
}
STAGE_COPIES = ("async", "tma")


class StageOp(indexing.SubscriptOp):
    """Copy a box of a buffer (its shape is the result type's; its first element is at the subscript) into the
    block's shared memory: every thread of the block reaches it together (in a loop, on every trip); loads then
    read the copy.

    How the copy is made is the schedule's (`ring N`: N buffers used in turn along the enclosing loop; `async` or
    `tma`: cp.async or the bulk tensor copy engine instead of loads and stores through registers; `producer`: the
    copies are issued by a producer warp that runs ahead of the block's threads as far as the ring allows;
    `prefetch P`: the copy for trip k + P is issued during trip k; `pad E`: rows padded by E elements;
    `swizzle(B, M, S)`: element offsets permuted, as `!kernel.smem` swizzles; `columns C`: the box's rows cut in
    blocks of C columns stored one block after another, `[box[-1] / C, ..., C]`, each block swizzled alone: how
    the copy engine and wgmma's descriptors hold rows wider than one swizzle span)."""

    name = "tile.stage"
    operand_names = ("source", "*indices")
    result_names = ("result",)
    attribute_types = {"index": AffineMap}
    optional_attributes = STAGE_ATTRIBUTES
    num_regions = 0
    traits = frozenset({"pure"})

    @property
    def ring(self) -> int:
        return self.attributes.get("ring", 1)

    @property
    def copy(self) -> str:
        return self.attributes.get("copy", "sync")

    @property
    def prefetch(self) -> int:
        return self.attributes.get("prefetch", 0)

    @property
    def producer(self) -> bool:
        return "producer" in self.attributes

    @property
    def columns(self) -> int:
        """Columns of a block of the shared copy (the whole row where it is not cut in blocks)."""
        return self.attributes.get("columns", self.box[-1])

    def copy_width(self) -> int:
        """Elements per piece of the copy: 16 bytes where the rows of the box, of the buffer and of the shared
        copy (padded) and the box's start allow it, else fewer; no more than a unit of its swizzle."""
        from .vectors import expand

        pad = self.attributes.get("pad", 0)
        swizzle = self.attributes.get("swizzle", ())
        nbytes = self.result.type.dtype.bytes
        v = max(1, 16 // nbytes)
        if swizzle:
            v = min(v, 1 << swizzle[1])
        last = expand(self.index_exprs()[-1])
        box, shape = self.box, self.source.type.shape
        while v > 1 and (box[-1] % v or (box[-1] + pad) % v or shape[-1] % v or not indexing.multiple_of(last, v)):
            v //= 2
        return v

    def why_not_ring(self) -> str | None:
        """Why the stage cannot cycle through several buffers along its loop (None when it can): it must sit
        directly in a loop that is neither distributed nor vectorized."""
        loop = self.parent_op
        if not isinstance(loop, LoopOp) or loop.bind or loop.vector > 1:
            return (
                "is multi-buffered or prefetched, so it must sit directly in a loop that is neither distributed nor "
                "vectorized"
            )
        return None

    def why_not_prefetch(self) -> str | None:
        """Why the stage's copy for a later trip cannot be issued ahead (None when it can)."""
        why = self.why_not_ring()
        if why:
            return why
        if self.copy not in STAGE_COPIES:
            return "is prefetched, which needs an asynchronous copy (async or tma)"
        if self.producer:
            return "is copied by a producer warp, which runs ahead by itself"
        loop = self.parent_op
        inside = {v for x in loop.walk() for v in x.results} | set(loop.ivs[1:])
        if any(v in inside for v in self.indices):
            return "is prefetched, but its box depends on values its loop computes (it can only use the loop index)"
        return None

    @staticmethod
    def build(source, exprs, box, hint=None, loc=UNKNOWN) -> StageOp:
        m, ops = indexing.canonical([indexing.as_value_expr(e) for e in exprs])
        t = TensorType(source.type.dtype, tuple(box))
        return StageOp([source, *ops], [t], {"index": m}, loc=loc, result_hints=[hint])

    @property
    def box(self) -> tuple[int, ...]:
        return self.result.type.shape

    def verify_(self):
        t = self.result.type
        src = self.source.type
        if not isinstance(t, TensorType) or not isinstance(src, TensorType):
            raise self.error("stages a box of a buffer as a shared-memory tensor")
        if t.dtype != src.dtype or t.rank != src.rank:
            raise self.error(f"stages a box of {src} as {t}: element type and rank must match")
        if not _is_function_buffer(self.source):
            raise self.error("stages a buffer of the function (an input, param or tile.buffer)")
        self.verify_subscript(t.shape, "box dimension")
        a = self.attributes
        for key in ("ring", "prefetch", "pad", "columns"):
            least = {"ring": 2, "columns": 1}.get(key, 0)
            if key in a and (not _is_int(a[key]) or a[key] < least):
                raise self.error(f"{key} must be an integer of at least {least}")
        if "columns" in a and t.shape[-1] % a["columns"]:
            raise self.error(f"columns {a['columns']} must divide the box's rows ({t.shape[-1]})")
        if "columns" in a and a.get("pad"):
            raise self.error("a stage stored in blocks of columns has no pad (its blocks' rows are dense)")
        if self.copy not in ("sync", *STAGE_COPIES):
            raise self.error(f"copy must be one of {', '.join(STAGE_COPIES)}, got {self.copy!r}")
        if self.prefetch and self.ring <= self.prefetch:
            raise self.error(f"prefetch {self.prefetch} needs a ring of more than {self.prefetch} buffers")
        if self.producer and (self.copy != "tma" or self.ring < 2 or self.prefetch):
            raise self.error("producer needs a tma copy into a ring of 2 buffers or more, and no prefetch")
        sw = a.get("swizzle")
        if sw is not None and (len(sw) != 3 or any(not _is_int(x) or x < 0 for x in sw)):
            raise self.error(f"swizzle must be three non-negative integers (B, M, S), got {sw!r}")

    def print_custom(self, p):
        p.write("tile.stage ", p.value(self.source), self.subscript(p), " -> smem")
        a = self.attributes
        if "ring" in a:
            p.write(f" ring {a['ring']}")
        if "copy" in a:
            p.write(f" {a['copy']}")
        if "producer" in a:
            p.write(" producer")
        if "prefetch" in a:
            p.write(f" prefetch {a['prefetch']}")
        if "pad" in a:
            p.write(f" pad {a['pad']}")
        if "swizzle" in a:
            p.write(f" swizzle({', '.join(map(str, a['swizzle']))})")
        if "columns" in a:
            p.write(f" columns {a['columns']}")
        p.attr_dict(a, elide=("index", *STAGE_ATTRIBUTES))
        p.write(" : ", p.type(self.result.type))


class LoadOp(indexing.LoadValueOp):
    """Read one element of a buffer or of a staged box."""

    name = "tile.load"

    def verify_(self):
        if not (_is_function_buffer(self.buffer) or _is_stage(self.buffer)):
            raise self.error("reads a buffer of the function or a tile.stage")
        super().verify_()


class StoreOp(indexing.StoreValueOp):
    """Write one element of a buffer (never inside a reduction); once per point (see the module docstring)."""

    name = "tile.store"


class IndexOp(indexing.IndexValueOp):
    """An index value computed from others: `tile.index %a0 * 64 + %a1`."""

    name = "tile.index"


# ---- queries passes share --------------------------------------------------------------------------------------
def _shared_by_column(op: Operation, axis: str) -> bool:
    from .columns import shared_by_column  # it builds on this module

    return shared_by_column(op, axis)


def bound_axes(op: Operation) -> set[str]:
    """Hardware axes the loops around `op` are distributed over."""
    return {a for lp in enclosing_loops(op) for a in lp.bind}


def uneven_loop(kernel: KernelOp, op: Operation) -> LoopOp | None:
    """The first loop around `op` distributed over threads whose trips differ between a block's threads (a barrier
    at `op` would not be reached by all of them), or None."""
    return next(
        (lp for lp in enclosing_loops(op) if set(lp.bind) & set(THREAD_AXES) and not lp.block_uniform(kernel)), None
    )


def axes_used_within(op: Operation) -> set[str]:
    """Hardware axes the loops and combines inside `op` (and `op` itself) distribute or combine over."""
    out = set()
    for inner in op.walk():
        if isinstance(inner, LoopOp):
            out.update(inner.bind)
        elif isinstance(inner, CombineOp):
            out.update(inner.over)
    return out


def linear_terms(e) -> list[tuple]:
    """An index expression as a sum of (atom, coefficient): atoms are values and non-linear parts (floordiv, mod,
    min, max); the constant term is (Const(1), c)."""
    from irforge import index_expr as ix

    if isinstance(e, ix.Const):
        return [(ix.Const(1), e.value)]
    if isinstance(e, (ix.Add, ix.Sub)):
        sign = 1 if isinstance(e, ix.Add) else -1
        return linear_terms(e.lhs) + [(a, sign * k) for a, k in linear_terms(e.rhs)]
    if isinstance(e, ix.Mul) and isinstance(e.rhs, ix.Const):
        return [(a, k * e.rhs.value) for a, k in linear_terms(e.lhs)]
    if isinstance(e, ix.Mul) and isinstance(e.lhs, ix.Const):
        return [(a, k * e.lhs.value) for a, k in linear_terms(e.rhs)]
    return [(e, 1)]


def fit_grid(kernel: KernelOp) -> None:
    """Size the grid so that every loop distributed over a block axis gets one unit per work item (fewer where
    CUDA's limits say so: the loops are then strided). Axes no loop is distributed over get one block. An axis a
    reduction is split over and combined through a cluster has one block per share (the cluster is those
    blocks): the loops after the split that share it stride over them."""
    need = dict.fromkeys(BLOCK_AXES, 1)
    shares: dict[str, int] = {}
    for lp in kernel.walk():
        if isinstance(lp, LoopOp):
            for a in lp.bind:
                if a in need:
                    others = math.prod(kernel.axis_size(b) for b in lp.bind if b != a)
                    need[a] = max(need[a], -(-lp.work_items // others))
                    if isinstance(lp, ReduceOp) and _combined_in_cluster(lp):
                        shares[a] = max(shares.get(a, 1), need[a])
    need.update(shares)
    for a, n in need.items():
        kernel.set_axis_size(a, min(n, target().max_grid[BLOCK_AXES.index(a)]))


def _combined_in_cluster(r: ReduceOp) -> bool:
    return any(isinstance(u, CombineOp) and u.attributes.get("via") == "cluster" for v in r.results for u in v.users)


# ---- syntax ----------------------------------------------------------------------------------------------------
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


dialect = Dialect(
    name="tile",
    summary="the GPU schedule: loops distributed over blocks and threads, combines, shared-memory stages",
    ops=(KernelOp, BufferOp, ParamOp, ForOp, ReduceOp, YieldOp, CombineOp, StageOp, LoadOp, StoreOp, IndexOp),
    level="tile",
    grammar=grammar_file(__name__, "tile.lark"),
    syntax=TileSyntax,
    interpreter="irforge.dialects.tile.interpreter:interpret",
)
