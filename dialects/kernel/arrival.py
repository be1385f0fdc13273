"""Arrival counters: blocks of one launch that learn which of them finished a shared piece of work last.

Blocks of a launch cannot wait for each other, but each can count its arrival at a counter in global memory: the
last of the `count` blocks to arrive knows the others are done, and may read what they wrote before arriving. This
is how a reduction split across blocks is finished inside its own kernel (the last block of a tile folds the
tile's partial carriers and runs the epilogue; CUTLASS's serial split-K and stream-K fix-up do the same) rather
than by a second kernel. The counter lives in a `zeroed` allocation, and the last block sets it back to zero, so
the next launch (or the next replay of a CUDA graph) finds it zero again.
"""

from __future__ import annotations

from irforge.index_expr import AffineMap
from irforge.types import boolean

from .ops import IndexedOp
from .types import PtrType


class ArriveOp(IndexedOp):
    """`%last = kernel.arrive %counter[i] of N`: this block arrives at counter `i`, shared by `N` blocks; every
    thread gets whether the block was the last of them to arrive. Release and acquire: the block's global writes
    before it are visible to the last block after it (a fence, a barrier, one thread's atomic increment, a fence,
    a barrier). The last block resets the counter to zero. Every thread of the block reaches it (it holds barriers),
    and each of the `N` blocks reaches it once per launch."""

    name = "kernel.arrive"
    writes_through = "counter"
    operand_names = ("counter", "*indices")
    result_names = ("last",)
    attribute_types = {"index": AffineMap, "count": int}
    num_regions = 0
    num_fixed = 1

    def group_sizes(self):
        return {"index": 1}

    def verify_op(self):
        self.verify_indices()
        t = self.counter.type
        if not isinstance(t, PtrType) or t.dtype.name != "i32":
            raise self.error(f"counts in global memory of i32 (a !kernel.ptr<i32>), not {t}")
        if self.attributes["count"] < 1:
            raise self.error(f"counts the arrivals of at least one block, not {self.attributes['count']}")
        if self.last.type != boolean:
            raise self.error(f"gives a bool, not {self.last.type}")

    def print_custom(self, p):
        p.write("kernel.arrive ", p.value(self.counter), "[", self.fmt(p, "index"), "]")
        p.write(f" of {self.attributes['count']}")
        p.attr_dict(self.attributes, elide=("index", "count"))


OPS = (ArriveOp,)
