"""Programmatic dependent launch (sm_90): a kernel that starts while the launch before it is still running.

A kernel holding `kernel.griddepcontrol_wait` is launched as a programmatic dependent of the launch before it in the
stream: its blocks may be scheduled as soon as every block of that launch has run
`kernel.griddepcontrol_launch_dependents` (or exited), and each thread's wait returns once that launch has
completed with all its memory writes visible. What a thread does before its wait overlaps the earlier kernel's tail:
here, `kernel.prefetch_l2` of buffers no launch writes (weights), so the bytes are on their way when the wait
returns. Every access of memory the earlier launch may write comes after the wait; the simulator checks it.
"""

from __future__ import annotations

from irforge.index_expr import AffineMap

from .ops import BareOp, IndexedOp, KernelFuncOp
from .types import PtrType


class GridDepWaitOp(BareOp):
    """`griddepcontrol.wait`: wait until the launch this kernel depends on has completed and its writes are
    visible. Its presence makes the kernel a programmatic dependent launch; it stands once, at the top level of
    the kernel's body."""

    name = "kernel.griddepcontrol_wait"

    def verify_op(self):
        if not isinstance(self.parent_op, KernelFuncOp):
            raise self.error("stands at the top level of a kernel.func's body (every thread waits, once)")
        waits = [o for o in self.parent_op.body.ops if isinstance(o, GridDepWaitOp)]
        if waits[0] is not self:
            raise self.error("a kernel waits for the launch before it once")


class GridDepLaunchDependentsOp(BareOp):
    """`griddepcontrol.launch_dependents`: this block no longer holds back the launch after it (which may then
    start, and waits for this one to complete before touching what it writes)."""

    name = "kernel.griddepcontrol_launch_dependents"


class PrefetchL2Op(IndexedOp):
    """`cp.async.bulk.prefetch.L2`: ask for `bytes` bytes of global memory from element `index` of `mem` to be
    brought into the L2 cache; a hint with no effect on any value (the start 16-byte aligned, `bytes` a positive
    multiple of 16, the range inside the buffer)."""

    name = "kernel.prefetch_l2"
    operand_names = ("mem", "*indices")
    result_names = ()
    attribute_types = {"index": AffineMap, "bytes": AffineMap}
    num_regions = 0
    num_fixed = 1
    index_groups = ("index", "bytes")

    def group_sizes(self):
        return {"index": 1, "bytes": 1}

    def verify_op(self):
        self.verify_indices()
        if not isinstance(self.mem.type, PtrType):
            raise self.error(f"prefetches global memory (a !kernel.ptr), not {self.mem.type}")

    def print_custom(self, p):
        p.write("kernel.prefetch_l2 ", p.value(self.mem), "[", self.fmt(p, "index"), "], ")
        p.write(self.fmt(p, "bytes"))


OPS = (GridDepWaitOp, GridDepLaunchDependentsOp, PrefetchL2Op)
