"""Memory: shared-memory buffers, loads, stores and atomics of scalars and register tiles (contiguous or strided,
as vector accesses), and the barrier and fence that order them."""

from __future__ import annotations

import math

from irforge.index_expr import AffineMap
from irforge.ir import Value
from irforge.types import ScalarType, TensorType

from ..types import MbarrierType, PtrType, SmemType, element_type
from .base import _UNIT_T, BareOp, IndexedOp, KernelFuncOp, KernelOp


# ---- strided tile accesses -------------------------------------------------------------------------------------
def tile_offsets(shape, strides) -> list[int]:
    """Element offsets (row-major over the tile) of a strided tile access: element i sits at sum(i_d * strides_d)."""
    out = [0]
    for n, s in zip(shape, strides):
        out = [o + k * s for o in out for k in range(n)]
    return out


def run_dim(shape, strides) -> int | None:
    """The dimension a strided tile access moves along as vectors: the last one of stride 1 and size > 1."""
    return next((d for d in reversed(range(len(shape))) if strides[d] == 1 and shape[d] > 1), None)


def access_runs(t: TensorType, strides, width: int | None = None) -> tuple[int, list[tuple[int, list[int]]]]:
    """(run, [(offset, tile positions)]): a strided tile access as runs of `run` contiguous elements along
    `run_dim` (its whole length, or `width` elements a run; 1 when there is none), each starting at an element
    offset and filling those flat tile positions."""
    shape = t.shape
    d = run_dim(shape, strides)
    if d is None or width == 1:
        return 1, [(o, [k]) for k, o in enumerate(tile_offsets(shape, strides))]
    run = width or shape[d]
    inner = math.prod(shape[d + 1 :])
    runs = []
    for k, o in enumerate(tile_offsets(shape, strides)):
        if (k // inner) % run == 0:
            runs.append((o, [k + j * inner for j in range(run)]))
    return run, runs


def default_strides(shape) -> tuple[int, ...]:
    out, n = [], 1
    for d in reversed(shape):
        out.append(n)
        n *= d
    return tuple(reversed(out))


def _mem_rank(t) -> int:
    return len(t.shape) if isinstance(t, SmemType) else 1


# ---- ops -------------------------------------------------------------------------------------------------------
class SmemOp(KernelOp):
    """A shared-memory buffer (or an array of mbarriers) of the block; `dynamic` places it in the launch's dynamic
    shared memory (needed above 48 KB)."""

    name = "kernel.smem"
    operand_names = ()
    result_names = ("result",)
    optional_attributes = {"dynamic": _UNIT_T}
    num_regions = 0

    def verify_op(self):
        if not isinstance(self.result.type, (SmemType, MbarrierType)):
            raise self.error(f"result must be !kernel.smem or !kernel.mbarrier, got {self.result.type}")
        if not isinstance(self.parent_op, KernelFuncOp):
            raise self.error("must be at the top level of the kernel body")

    def print_custom(self, p):
        t = self.result.type
        p.write("kernel.smem ")
        if "dynamic" in self.attributes:
            p.write("dynamic ")
        if isinstance(t, MbarrierType):
            p.write(f"mbarrier[{t.count}]")
        else:
            p.write(p.type(TensorType(t.dtype, t.shape)))
            if t.swizzle:
                p.write(" swizzle(", ", ".join(map(str, t.swizzle)), ")")
        p.attr_dict(self.attributes, elide=("dynamic",))


def _check_mem_access(op, mem: Value, value_type, group: str = "index") -> None:
    """A load, store or atomic of `value_type` (a scalar or a tile of contiguous elements) at `mem[group]`."""
    t = mem.type
    if not isinstance(t, (PtrType, SmemType)):
        raise op.error(f"accesses a !kernel.ptr or !kernel.smem, not {t}")
    rank = _mem_rank(t)
    if len(op.exprs(group)) != rank:
        raise op.error(f"needs {rank} index expression(s) for {t}, got {len(op.exprs(group))}")
    if element_type(value_type) != t.dtype or not isinstance(value_type, (ScalarType, TensorType)):
        raise op.error(f"moves {value_type}, which does not match the element type of {t}")
    strides = op.attributes.get("strides")
    if strides is not None and (
        not isinstance(value_type, TensorType)
        or len(strides) != value_type.rank
        or any(not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in strides)
    ):
        raise op.error(f"strides {list(strides)} must give one non-negative element stride per dimension of the tile")
    if isinstance(value_type, TensorType):
        if 0 in value_type.shape:
            raise op.error(f"moves {value_type}, a register tile with no elements")
        width = op.attributes.get("vector")
        if width is not None:
            d = run_dim(value_type.shape, strides or default_strides(value_type.shape))
            if not isinstance(width, int) or width < 1 or (d is not None and value_type.shape[d] % width):
                raise op.error(f"vector {width} must divide the length of the tile's contiguous runs")
        run, _ = access_runs(value_type, strides or default_strides(value_type.shape), width)
        if isinstance(t, SmemType) and run > t.shape[-1]:
            raise op.error(f"moves {run} contiguous elements, more than a row of {t}")
        nbytes = run * t.dtype.bytes
        if not (nbytes <= 16 and nbytes & (nbytes - 1) == 0) and nbytes % 16 != 0:
            raise op.error(f"moves {nbytes} bytes; vector accesses move 1, 2, 4, 8 or 16 bytes, or multiples of 16")
    if op.attributes.get("xor_runs") and not (isinstance(t, SmemType) and t.swizzle):
        raise op.error(f"xor_runs addresses runs through a swizzle, and {t} has none")


class LoadOp(IndexedOp):
    """Read a scalar, or a register tile of contiguous elements (a vector access of up to 16 bytes at a time, so
    the address must be aligned to the access), from global or shared memory. With `strides`, tile element
    (i0, i1, ...) is at the address plus sum(i_d * strides_d) elements, and the last dimension of stride 1 moves
    as vectors (`{strides = [64, 1]} : f32[2,4]` reads two rows of four), `vector` elements at a time when the
    addresses are only aligned to that many. `xor_runs` (a swizzled shared memory): the lowering proved that no
    run's offset from the first element shares a bit with that element's offset, so each run's swizzled address
    is the first element's XOR the run's swizzled offset (the same addresses, one swizzle computed)."""

    name = "kernel.load"
    operand_names = ("mem", "*indices")
    result_names = ("result",)
    attribute_types = {"index": AffineMap}
    optional_attributes = {"strides": tuple, "vector": int, "xor_runs": bool}
    num_regions = 0
    num_fixed = 1

    def verify_op(self):
        self.verify_indices()
        _check_mem_access(self, self.mem, self.result.type)

    def print_custom(self, p):
        p.write("kernel.load ", p.value(self.mem), "[", self.fmt(p, "index"), "]")
        p.attr_dict(self.attributes, elide=("index",))
        p.write(" : ", p.type(self.result.type))


class StoreOp(IndexedOp):
    """Write a scalar or a register tile to global or shared memory (contiguous, or `strides`, `vector` and
    `xor_runs` as `kernel.load`)."""

    name = "kernel.store"
    operand_names = ("value", "mem", "*indices")
    result_names = ()
    attribute_types = {"index": AffineMap}
    optional_attributes = {"strides": tuple, "vector": int, "xor_runs": bool}
    num_regions = 0
    num_fixed = 2

    def verify_op(self):
        self.verify_indices()
        _check_mem_access(self, self.mem, self.value.type)

    def print_custom(self, p):
        p.write("kernel.store ", p.value(self.value), ", ", p.value(self.mem), "[", self.fmt(p, "index"), "]")
        p.attr_dict(self.attributes, elide=("index",))


class AtomicOp(IndexedOp):
    """An atomic read-modify-write of one element (`atomicAdd`; max/min on floats by compare-and-swap), or of each
    element of a register tile (at the addresses a `kernel.store` of it with the same `strides` would write)."""

    name = "kernel.atomic"
    operand_names = ("value", "mem", "*indices")
    result_names = ()
    attribute_types = {"kind": str, "index": AffineMap}
    optional_attributes = {"strides": tuple}
    num_regions = 0
    num_fixed = 2

    def verify_op(self):
        self.verify_indices()
        if self.attributes["kind"] not in ("add", "max", "min"):
            raise self.error(f"kind must be add, max or min, got {self.attributes['kind']!r}")
        if not isinstance(self.value.type, (ScalarType, TensorType)):
            raise self.error("updates a scalar element or the elements of a register tile")
        _check_mem_access(self, self.mem, self.value.type)
        if element_type(self.value.type).name in ("bool", "u8", "i8", "i16", "index"):
            raise self.error(f"no atomics on {self.value.type}")

    def print_custom(self, p):
        p.write("kernel.atomic ", self.attributes["kind"], " ", p.value(self.value), ", ", p.value(self.mem))
        p.write("[", self.fmt(p, "index"), "]")
        p.attr_dict(self.attributes, elide=("kind", "index"))


class BarrierOp(BareOp):
    """`__syncthreads()`: every thread of the block waits here; orders shared-memory accesses across it."""

    name = "kernel.barrier"


class FenceProxyAsyncOp(BareOp):
    """`fence.proxy.async.shared::cta`: makes this thread's ordinary shared-memory writes visible to the async
    proxy (TMA, wgmma) that reads them next."""

    name = "kernel.fence_proxy_async"
