"""Thread block clusters (sm_90): blocks launched together on one GPU processing cluster, which wait for each other
and read each other's shared memory.

A `kernel.func` with `cluster = [x, y, z]` runs in clusters of that many blocks (each grid dimension a multiple of
the cluster's; block `b` of the grid is rank `b mod cluster` along each axis, x fastest). `kernel.cluster_sync` waits
until every thread of the cluster has reached it, and orders the shared-memory writes before it before the reads
after it, the other blocks' included. `kernel.peer %buf rank r` is the shared buffer `%buf` of the cluster's block of
rank `r` (distributed shared memory): loads read it as they read the block's own. A block whose shared memory a peer
may still read must not exit: a kernel that reads its peers ends with a `kernel.cluster_sync`.
"""

from __future__ import annotations

from irforge.index_expr import AffineMap
from irforge.types import TensorType

from .ops import BareOp, IndexedOp, KernelFuncOp
from .types import SmemType

PORTABLE_CLUSTER = 8  # blocks a cluster may hold on every sm_90 GPU (more needs a non-portable opt-in)


class ClusterSyncOp(BareOp):
    """`barrier.cluster.arrive.release` then `barrier.cluster.wait.acquire`: every thread of the cluster waits
    here; what the cluster's threads wrote to shared memory before it, all of them can read after it."""

    name = "kernel.cluster_sync"

    def verify_op(self):
        k = self.parent_op
        while k is not None and not isinstance(k, KernelFuncOp):
            k = k.parent_op
        if k is not None and "cluster" not in k.attributes:
            raise self.error("synchronizes a cluster, but its kernel.func has no `cluster` attribute")


class PeerOp(IndexedOp):
    """The shared buffer `buffer` of the cluster's block of rank `rank` (its linear rank in the cluster)."""

    name = "kernel.peer"
    operand_names = ("buffer", "*indices")
    result_names = ("peer",)
    attribute_types = {"rank": AffineMap}
    num_regions = 0
    num_fixed = 1
    index_groups = ("rank",)
    traits = frozenset({"pure"})

    def group_sizes(self):
        return {"rank": 1}

    def verify_op(self):
        self.verify_indices()
        if not isinstance(self.buffer.type, SmemType):
            raise self.error(f"maps a shared buffer (!kernel.smem), not {self.buffer.type}")
        if self.peer.type != self.buffer.type:
            raise self.error(f"has the type of the buffer it maps, {self.buffer.type}, not {self.peer.type}")

    def print_custom(self, p):
        p.write("kernel.peer ", p.value(self.buffer), " rank ", self.fmt(p, "rank"), " : ")
        t = self.peer.type
        p.write(p.type(TensorType(t.dtype, t.shape)))
        if t.swizzle:
            p.write(" swizzle(", ", ".join(map(str, t.swizzle)), ")")


def verify_cluster(k: KernelFuncOp) -> None:
    """A kernel's `cluster` attribute: three positive sizes dividing its grid, at most PORTABLE_CLUSTER blocks."""
    dims = k.attributes.get("cluster")
    if dims is None:
        return
    grid = k.attributes["grid"]
    if len(dims) != 3 or any(not isinstance(d, int) or isinstance(d, bool) or d <= 0 for d in dims):
        raise k.error(f"'cluster' must be 3 positive integers, got {list(dims)}")
    if any(g % d for g, d in zip(grid, dims)):
        raise k.error(f"its cluster {list(dims)} does not divide its grid {list(grid)}")
    if dims[0] * dims[1] * dims[2] > PORTABLE_CLUSTER:
        raise k.error(f"its cluster of {dims[0] * dims[1] * dims[2]} blocks is over the {PORTABLE_CLUSTER} every sm_90 GPU runs")


OPS = (ClusterSyncOp, PeerOp)
