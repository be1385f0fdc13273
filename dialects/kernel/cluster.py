"""Thread block clusters (sm_90): blocks launched together on one GPU processing cluster, each able to reach the
others' shared memory.

A `kernel.func` with `cluster(x, y, z)` is launched in clusters of that many blocks (the grid a multiple of it, at
most 8 blocks: the portable size). `kernel.cluster_map` names another block's copy of a shared buffer (distributed
shared memory): loads through it read that block's buffer. `kernel.cluster_barrier` orders accesses across the
cluster as `kernel.barrier` does across a block: every thread of every block of the cluster arrives (releasing its
writes) and waits (acquiring theirs). A block may exit only when no other block reads its shared memory any more:
a barrier after the last remote read. `kernel.store_async` pushes a value into another block's shared memory
instead, completing on that block's mbarrier, so that the receiver's wait orders it and no cluster barrier is
needed there. The simulator runs a cluster's blocks together and checks all three.
"""

from __future__ import annotations

from irforge.index_expr import AffineMap
from irforge.ir import OpResult
from irforge.target import target
from irforge.types import ScalarType, TensorType

from .ops import BareOp, IndexedOp, KernelFuncOp, SmemOp
from .ops.base import CLUSTER_LIMIT
from .types import MbarrierType, SmemType


def cluster_dims(kernel: KernelFuncOp) -> tuple[int, int, int]:
    """The kernel's cluster shape ((1, 1, 1): no cluster)."""
    return tuple(kernel.attributes.get("cluster", (1, 1, 1)))


def why_not(blocks: int) -> str | None:
    """Why `blocks` blocks cannot be one cluster on the target (None: they can)."""
    if target().sm < 90:
        return f"thread block clusters need sm_90 or later, and the target is {target().arch}"
    if blocks > CLUSTER_LIMIT:
        return f"{blocks} blocks are more than a cluster holds ({CLUSTER_LIMIT})"
    return None


def _kernel(op) -> KernelFuncOp | None:
    return next((a for a in op.ancestors() if isinstance(a, KernelFuncOp)), None)


def _in_cluster(op) -> None:
    k = _kernel(op)
    if k is not None and cluster_dims(k) == (1, 1, 1):
        raise op.error("needs a kernel launched in clusters (a kernel.func with cluster(...))")


def _shared_op_result(v) -> bool:
    return isinstance(v, OpResult) and isinstance(v.op, SmemOp)


class ClusterBarrierOp(BareOp):
    """`barrier.cluster.arrive.release` then `barrier.cluster.wait.acquire`: every thread of every block of the
    cluster waits here; orders shared-memory accesses (local and remote) across it."""

    name = "kernel.cluster_barrier"

    def verify_op(self):
        _in_cluster(self)


class ClusterMapOp(IndexedOp):
    """`mapa`: the shared buffer `mem` of the block of rank `rank` in this block's cluster (ranks run x-fastest
    over the cluster's shape); loads through the result read that block's copy."""

    name = "kernel.cluster_map"
    operand_names = ("mem", "*indices")
    result_names = ("result",)
    attribute_types = {"rank": AffineMap}
    num_regions = 0
    num_fixed = 1
    index_groups = ("rank",)

    def group_sizes(self):
        return {"rank": 1}

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        return [operand_types[0]]

    def verify_op(self):
        self.verify_indices()
        mem = self.operands[0]
        if not isinstance(mem.type, SmemType) or not _shared_op_result(mem):
            raise self.error(f"maps a shared buffer (a kernel.smem result), not {mem.type}")
        if self.result.type != mem.type:
            raise self.error(f"result must have the buffer's type {mem.type}, got {self.result.type}")
        _in_cluster(self)

    def print_custom(self, p):
        p.write("kernel.cluster_map ", p.value(self.operands[0]), ", rank ", self.fmt(p, "rank"))


class StoreAsyncOp(IndexedOp):
    """`st.async...mbarrier::complete_tx::bytes`: store a value into shared buffer `mem` of the block of rank `rank`
    in this block's cluster (at `mem[index]`), completing that many transaction bytes on mbarrier `bar[bar_index]`
    of that block: the receiver learns of the data through its own barrier (it announces the bytes with
    `expect_tx`), with no cluster barrier between them. A scalar or a contiguous tile of 32-bit elements (moved 4,
    2 or 1 at a time)."""

    name = "kernel.store_async"
    operand_names = ("value", "mem", "bar", "*indices")
    result_names = ()
    attribute_types = {"index": AffineMap, "bar_index": AffineMap, "rank": AffineMap}
    num_regions = 0
    num_fixed = 3
    index_groups = ("index", "bar_index", "rank")

    def group_sizes(self):
        return {"index": None, "bar_index": 1, "rank": 1}

    @property
    def value(self):
        return self.operands[0]

    @property
    def mem(self):
        return self.operands[1]

    @property
    def bar(self):
        return self.operands[2]

    def verify_op(self):
        self.verify_indices()
        mem, bar, t = self.mem, self.bar, self.value.type
        if not isinstance(mem.type, SmemType) or not _shared_op_result(mem):
            raise self.error(f"stores into a shared buffer (a kernel.smem result), not {mem.type}")
        if not isinstance(bar.type, MbarrierType) or not _shared_op_result(bar):
            raise self.error(f"completes on an mbarrier array (a kernel.smem result), not {bar.type}")
        if len(self.exprs("index")) != len(mem.type.shape):
            raise self.error(f"needs {len(mem.type.shape)} index expression(s) for {mem.type}")
        elem = t.dtype if isinstance(t, TensorType) else t
        if not isinstance(elem, ScalarType) or elem != mem.type.dtype or elem.bytes != 4:
            raise self.error(f"stores {t}: 32-bit elements of the buffer's type {mem.type.dtype}")
        _in_cluster(self)

    def print_custom(self, p):
        p.write("kernel.store_async ", p.value(self.value), ", ", p.value(self.mem), "[", self.fmt(p, "index"), "], ")
        p.write(p.value(self.bar), "[", self.fmt(p, "bar_index"), "], rank ", self.fmt(p, "rank"))


OPS = (ClusterBarrierOp, ClusterMapOp, StoreAsyncOp)
