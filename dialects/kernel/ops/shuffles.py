"""Warp shuffles: each lane reads a value from another lane of its (sub-)warp."""

from __future__ import annotations

from typing import ClassVar

from irforge.index_expr import AffineMap
from irforge.types import ScalarType, TensorType

from .base import IndexedOp


class ShuffleOp(IndexedOp):
    """Base of the warp shuffles: each lane reads `value` from another lane of its (sub-)warp of `width` lanes."""

    operand_names = ("value", "*indices")
    result_names = ("result",)
    attribute_types = {"lane": AffineMap}
    optional_attributes = {"width": int}
    num_regions = 0
    traits = frozenset({"pure"})
    num_fixed = 1
    index_groups = ("lane",)
    mode: ClassVar[str] = ""

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        return [operand_types[0]]

    def group_sizes(self):
        return {"lane": 1}

    def verify_op(self):
        self.verify_indices()
        w = self.attributes.get("width", 32)
        if w not in (1, 2, 4, 8, 16, 32):
            raise self.error(f"width must be a power of two up to 32, got {w}")
        if not isinstance(self.value.type, (ScalarType, TensorType)) or self.result.type != self.value.type:
            raise self.error(f"shuffles a scalar or register tile into the same type, got {self.value.type}")

    def print_custom(self, p):
        p.write(self.name, " ", p.value(self.value), ", ", self.fmt(p, "lane"))
        p.attr_dict(self.attributes, elide=("lane",))
        p.write(" : ", p.type(self.result.type))


class ShflXorOp(ShuffleOp):
    """`__shfl_xor_sync`: read from lane `lane ^ mask` (butterfly reductions)."""

    name = "kernel.shfl_xor"
    mode = "xor"


class ShflDownOp(ShuffleOp):
    """`__shfl_down_sync`: read from lane `lane + delta` (a lane past the end keeps its own value)."""

    name = "kernel.shfl_down"
    mode = "down"


class ShflUpOp(ShuffleOp):
    """`__shfl_up_sync`: read from lane `lane - delta` (a lane before the start keeps its own value)."""

    name = "kernel.shfl_up"
    mode = "up"


class ShflIdxOp(ShuffleOp):
    """`__shfl_sync`: read from the given lane (broadcasts)."""

    name = "kernel.shfl_idx"
    mode = "idx"
