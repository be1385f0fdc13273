"""The tile dialect's program structure and memory: kernels with their launch shapes (the hardware axes), the
buffers and params they read and write, and the ops that stage, load and store buffers and compute indices."""

from __future__ import annotations

import math

from irforge.attributes import UNIT, SymbolRef
from irforge.index_expr import AffineMap
from irforge.ir import Block, OpResult, Region, Value
from irforge.location import UNKNOWN
from irforge.target import target
from irforge.types import TensorType

from ..launch import dims_text
from ..loop import indexing

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
        from .loops import LoopOp  # it builds on this module

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
    """Write one element of a buffer (never inside a reduction); once per point (see the docstring of
    `irforge.dialects.tile`)."""

    name = "tile.store"


class IndexOp(indexing.IndexValueOp):
    """An index value computed from others: `tile.index %a0 * 64 + %a1`."""

    name = "tile.index"
