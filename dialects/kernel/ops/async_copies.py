"""Asynchronous copies into shared memory: cp.async with its commit groups, and TMA boxes completing on mbarriers."""

from __future__ import annotations

from irforge.index_expr import AffineMap
from irforge.types import TensorType

from ..types import MbarrierType, PtrType, SmemType, TensorMapType, tma_swizzle
from .base import BareOp, GroupWaitOp, IndexedOp
from .memory import _check_mem_access


# ---- asynchronous copies ---------------------------------------------------------------------------------------
class CpAsyncOp(IndexedOp):
    """`cp.async`: copy 4, 8 or 16 contiguous bytes from global to shared memory without passing through
    registers; completes at a later `kernel.cp_async_wait` (after `kernel.cp_async_commit`)."""

    name = "kernel.cp_async"
    operand_names = ("src", "dst", "*indices")
    result_names = ()
    attribute_types = {"src_index": AffineMap, "dst_index": AffineMap, "chunk": TensorType}
    num_regions = 0
    num_fixed = 2
    index_groups = ("src_index", "dst_index")

    def verify_op(self):
        self.verify_indices()
        chunk = self.attributes["chunk"]
        if not isinstance(self.src.type, PtrType) or not isinstance(self.dst.type, SmemType):
            raise self.error("copies from a !kernel.ptr to a !kernel.smem")
        _check_mem_access(self, self.src, chunk, "src_index")
        _check_mem_access(self, self.dst, chunk, "dst_index")
        if chunk.numel * chunk.dtype.bytes not in (4, 8, 16):
            raise self.error(f"copies {chunk}, which is not 4, 8 or 16 bytes")

    def print_custom(self, p):
        p.write("kernel.cp_async ", p.value(self.src), "[", self.fmt(p, "src_index"), "] -> ")
        p.write(p.value(self.dst), "[", self.fmt(p, "dst_index"), "]")
        p.attr_dict(self.attributes, elide=("src_index", "dst_index", "chunk"))
        p.write(" : ", p.type(self.attributes["chunk"]))


class CpAsyncCommitOp(BareOp):
    """`cp.async.commit_group`: close this thread's group of pending cp.async copies."""

    name = "kernel.cp_async_commit"


class CpAsyncWaitOp(GroupWaitOp):
    """`cp.async.wait_group N`: wait until at most `pending` of this thread's committed groups are in flight."""

    name = "kernel.cp_async_wait"


# ---- mbarriers and TMA -----------------------------------------------------------------------------------------
class _MbarrierOp(IndexedOp):
    num_fixed = 1
    num_regions = 0
    result_names = ()

    def verify_bar(self):
        self.verify_indices()
        if not isinstance(self.operands[0].type, MbarrierType):
            raise self.error(f"needs a !kernel.mbarrier, got {self.operands[0].type}")


class MbarrierInitOp(_MbarrierOp):
    """`mbarrier.init`: set a barrier to expect `count` arrivals per phase (one thread does it, then a
    `kernel.barrier` publishes it)."""

    name = "kernel.mbarrier_init"
    operand_names = ("bar", "*indices")
    attribute_types = {"index": AffineMap, "count": int}

    def group_sizes(self):
        return {"index": 1}

    def verify_op(self):
        self.verify_bar()
        if self.attributes["count"] <= 0:
            raise self.error("count must be positive")

    def print_custom(self, p):
        p.write("kernel.mbarrier_init ", p.value(self.bar), "[", self.fmt(p, "index"), "], ")
        p.write(str(self.attributes["count"]))


class MbarrierArriveOp(_MbarrierOp):
    """`mbarrier.arrive`: count this thread's arrival; with `expect_tx N`, first announce N more bytes that async
    copies (TMA) will deliver to the barrier's current phase."""

    name = "kernel.mbarrier_arrive"
    operand_names = ("bar", "*indices")
    attribute_types = {"index": AffineMap}
    optional_attributes = {"expect_tx": int}

    def group_sizes(self):
        return {"index": 1}

    def verify_op(self):
        self.verify_bar()
        if self.attributes.get("expect_tx", 0) < 0:
            raise self.error("expect_tx must be non-negative")

    def print_custom(self, p):
        p.write("kernel.mbarrier_arrive ", p.value(self.bar), "[", self.fmt(p, "index"), "]")
        if "expect_tx" in self.attributes:
            p.write(f" expect_tx {self.attributes['expect_tx']}")


class MbarrierWaitOp(_MbarrierOp):
    """`mbarrier.try_wait.parity` in a loop: wait until the barrier's phase of the given parity (0 or 1) has
    completed."""

    name = "kernel.mbarrier_wait"
    operand_names = ("bar", "*indices")
    attribute_types = {"index": AffineMap, "parity": AffineMap}
    index_groups = ("index", "parity")

    def group_sizes(self):
        return {"index": 1, "parity": 1}

    def verify_op(self):
        self.verify_bar()

    def print_custom(self, p):
        p.write("kernel.mbarrier_wait ", p.value(self.bar), "[", self.fmt(p, "index"), "], parity ")
        p.write(self.fmt(p, "parity"))


class TmaLoadOp(IndexedOp):
    """`cp.async.bulk.tensor`: one thread asks the copy engine for the box of a tensor map at `coords` (element
    coordinates, outermost first); it lands in a shared-memory buffer (or the sub-buffer its leading indices pick,
    whose shape is the box), swizzled as the tensor map says, and completes the transaction bytes on an
    mbarrier."""

    name = "kernel.tma_load"
    operand_names = ("tmap", "dst", "bar", "*indices")
    result_names = ()
    attribute_types = {"coords": AffineMap, "dst_index": AffineMap, "bar_index": AffineMap}
    num_regions = 0
    num_fixed = 3
    index_groups = ("coords", "dst_index", "bar_index")

    def group_sizes(self):
        return {"coords": len(self.tmap.type.shape), "bar_index": 1}

    def verify_op(self):
        tm, dst, bar = self.tmap.type, self.dst.type, self.bar.type
        if not (isinstance(tm, TensorMapType) and isinstance(dst, SmemType) and isinstance(bar, MbarrierType)):
            raise self.error("copies from a !kernel.tensormap to a !kernel.smem, completing on a !kernel.mbarrier")
        self.verify_indices()
        k = len(self.exprs("dst_index"))
        if dst.dtype != tm.dtype or tuple(dst.shape[k:]) != tuple(tm.box):
            raise self.error(f"destination {dst} indexed by {k} must be a {tm.dtype} box of shape {list(tm.box)}")
        want = tma_swizzle(tm.swizzle, tm.dtype) if tm.swizzle else ()
        if tuple(dst.swizzle) != want:
            what = f"swizzle({', '.join(map(str, want))})" if want else "no swizzle"
            raise self.error(f"the tensor map writes its boxes with {what}, so the destination {dst} must have it")

    def print_custom(self, p):
        p.write("kernel.tma_load ", p.value(self.tmap), "[", self.fmt(p, "coords"), "] -> ", p.value(self.dst))
        if self.exprs("dst_index"):
            p.write("[", self.fmt(p, "dst_index"), "]")
        p.write(", ", p.value(self.bar), "[", self.fmt(p, "bar_index"), "]")
