"""Thread geometry: a thread's position in its block and grid, its lane and warp, and index values computed from
index expressions."""

from __future__ import annotations

from irforge.index_expr import AffineMap
from irforge.types import index

from .base import IndexedOp, KernelOp

AXES = ("x", "y", "z")
LAUNCH_AXES = tuple(f"{k}Idx.{d}" for k in ("thread", "block") for d in "xyz")


class _AxisOp(KernelOp):
    operand_names = ()
    result_names = ("result",)
    attribute_types = {"dim": str}
    num_regions = 0
    traits = frozenset({"pure"})

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        return [index]

    def verify_op(self):
        if self.attributes["dim"] not in AXES:
            raise self.error(f"dimension must be x, y or z, got {self.attributes['dim']!r}")
        if self.result.type != index:
            raise self.error("result must be index")

    def print_custom(self, p):
        p.write(self.name, " ", self.attributes["dim"])


class ThreadIdOp(_AxisOp):
    """`threadIdx.<dim>`: this thread's position in its block."""

    name = "kernel.thread_id"


class BlockIdOp(_AxisOp):
    """`blockIdx.<dim>`: this block's position in the grid."""

    name = "kernel.block_id"


class BlockDimOp(_AxisOp):
    """`blockDim.<dim>`: threads per block along a dimension (a constant of the kernel)."""

    name = "kernel.block_dim"


class GridDimOp(_AxisOp):
    """`gridDim.<dim>`: blocks in the grid along a dimension (a constant of the kernel)."""

    name = "kernel.grid_dim"


class _LinearOp(KernelOp):
    operand_names = ()
    result_names = ("result",)
    num_regions = 0
    traits = frozenset({"pure"})

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        return [index]

    def print_custom(self, p):
        p.write(self.name)


class LaneIdOp(_LinearOp):
    """This thread's lane in its warp: the linear thread index (x fastest) modulo 32."""

    name = "kernel.lane_id"


class WarpIdOp(_LinearOp):
    """This thread's warp in its block: the linear thread index (x fastest) divided by 32."""

    name = "kernel.warp_id"


class IndexOp(IndexedOp):
    """An index value computed from an index expression (`%off = kernel.index %row * 2048 + %col`)."""

    name = "kernel.index"
    operand_names = ("*values",)
    result_names = ("result",)
    attribute_types = {"expr": AffineMap}
    num_regions = 0
    traits = frozenset({"pure"})
    index_groups = ("expr",)

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        return [index]

    def group_sizes(self):
        return {"expr": 1}

    def verify_op(self):
        self.verify_indices()
        if self.result.type != index:
            raise self.error("result must be index")

    def print_custom(self, p):
        p.write("kernel.index ", self.fmt(p, "expr"))
