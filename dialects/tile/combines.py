"""The tile dialect's cross-thread combine: `tile.combine` folds the reduction carriers of the threads that
differ only along its axes; over a block axis, `via` atomics, partials or a thread block cluster."""

from __future__ import annotations

from irforge.ir import Operation
from irforge.location import UNKNOWN

from ..loop import indexing
from ..loop.indexing import kernel_of
from .loops import _shared_by_column, bound_axes, carriers_of
from .program import AXES, BLOCK_AXES, _is_int

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
