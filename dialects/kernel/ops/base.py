"""The kernel function and the bases of the ops inside it: index expressions over SSA values (`Val`,
`bind_values`), `KernelOp` (placed in a `kernel.func`), `IndexedOp` (addresses and indices as `AffineMap`s),
and `BareOp`/`GroupWaitOp`, which the fences, barriers, commits and waits of every module share."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from irforge import index_expr as ix
from irforge.attributes import UNIT, SymbolRef
from irforge.index_expr import AffineMap, IndexExpr
from irforge.ir import Block, Operation, Region, Value
from irforge.target import target
from irforge.types import FunctionType, index

from ...launch import dims_text, launch_dims
from ..types import PtrType, TensorMapType

_UNIT_T = type(UNIT)


# ---- index expressions over SSA values -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, eq=False)
class Val(IndexExpr):
    """An SSA index value inside an index expression built in Python (compared by identity)."""

    value: Value

    def format(self, leaf=None) -> str:
        return f"%{self.value.name_hint or '?'}"


def bind_values(groups: list[list[IndexExpr]]) -> tuple[list[AffineMap], list[Value]]:
    """Number the values in `groups` (lists of expressions with `Val` leaves) by first appearance: one map per group,
    all over the same dimensions, and the values in dimension order (the op's index operands)."""
    values: list[Value] = []
    slot: dict[int, int] = {}

    def go(e: IndexExpr) -> IndexExpr:
        if isinstance(e, Val):
            if id(e.value) not in slot:
                slot[id(e.value)] = len(values)
                values.append(e.value)
            return ix.Dim(slot[id(e.value)])
        kids = e.children()
        return e.rebuild([go(k) for k in kids]) if kids else e

    bound = [[go(ix.as_expr(e)) for e in g] for g in groups]
    return [AffineMap(len(values), tuple(b)) for b in bound], values


class KernelOp(Operation):
    """Base of the device-side ops: they live inside a `kernel.func`."""

    device: ClassVar[bool] = True

    def verify_(self):
        if self.device and enclosing_kernel(self) is None:
            raise self.error("must be inside a kernel.func")
        self.verify_op()

    def verify_op(self) -> None:
        """Op-specific checks (after the placement check)."""


def enclosing_kernel(op: Operation) -> KernelFuncOp | None:
    return next((a for a in op.ancestors() if isinstance(a, KernelFuncOp)), None)


class IndexedOp(KernelOp):
    """An op with index expressions: `num_fixed` leading operands, then the index values of its maps.

    `index_groups` names the AffineMap attributes (all over the same dimensions); `group_sizes` says how many
    expressions each must hold (checked by `verify_op`)."""

    num_fixed: ClassVar[int] = 0
    index_groups: ClassVar[tuple[str, ...]] = ("index",)

    @property
    def index_operands(self) -> tuple[Value, ...]:
        n = self.attributes[self.index_groups[0]].num_dims
        return self.operands[self.num_fixed : self.num_fixed + n]

    def exprs(self, group: str) -> tuple[IndexExpr, ...]:
        return self.attributes[group].results

    def group_sizes(self) -> dict[str, int | None]:
        """Expected number of expressions per group (None: any)."""
        return {}

    def verify_indices(self) -> None:
        maps = [self.attributes[g] for g in self.index_groups]
        n = maps[0].num_dims
        if any(m.num_dims != n for m in maps):
            raise self.error("index maps must all be over the same dimensions")
        if len(self.operands) < self.num_fixed + n:
            raise self.error(f"has {len(self.operands)} operands but its index maps need {self.num_fixed + n}")
        for v in self.index_operands:
            if v.type != index:
                raise self.error(f"index operands must have type index, got {v.type}")
        for g, want in self.group_sizes().items():
            got = len(self.attributes[g].results)
            if want is not None and got != want:
                raise self.error(f"needs {want} index expression(s) in '{g}', got {got}")

    def fmt(self, p, group: str) -> str:
        """The expressions of `group`, comma-separated, with SSA values in place of dimensions."""
        vals = self.index_operands
        return ", ".join(p.index_expr(e, vals) for e in self.exprs(group))


# ---- kernels ---------------------------------------------------------------------------------------------------
CLUSTER_LIMIT = 8  # blocks a cluster may hold on every sm_90 GPU (the portable size)


class KernelFuncOp(Operation):
    """A GPU kernel: typed pointer (or tensor-map) parameters, a fixed launch shape, a SIMT body that every thread
    of every block runs."""

    name = "kernel.func"
    operand_names = ()
    result_names = ()
    attribute_types = {"sym_name": str, "function_type": FunctionType, "grid": tuple, "block": tuple}
    optional_attributes = {"index_bits": int, "cluster": tuple}
    num_regions = 1
    traits = frozenset({"isolated", "symbol", "single_block"})
    anchor_aliases = ("kernel",)

    @staticmethod
    def build(name: str, param_types, grid, block, arg_hints=None, attributes=None, loc=None) -> KernelFuncOp:
        from irforge.location import UNKNOWN

        attrs = {
            **(attributes or {}),
            "sym_name": name,
            "function_type": FunctionType(tuple(param_types), ()),
            "grid": launch_dims(grid),
            "block": launch_dims(block),
        }
        return KernelFuncOp((), (), attrs, [Region([Block(param_types, arg_hints)])], loc or UNKNOWN)

    @property
    def args(self):
        return self.body.args

    @property
    def threads(self) -> int:
        x, y, z = self.attributes["block"]
        return x * y * z

    def verify_(self):
        ft = self.attributes["function_type"]
        if ft.outputs:
            raise self.error("a kernel returns nothing; write results through pointer parameters")
        if tuple(a.type for a in self.body.args) != ft.inputs:
            raise self.error(f"arguments {[str(a.type) for a in self.body.args]} do not match its type {ft}")
        for t in ft.inputs:
            if not isinstance(t, (PtrType, TensorMapType)):
                # Shapes are static, so sizes are constants in the body; launches bind buffers only.
                raise self.error(f"parameter type must be !kernel.ptr or !kernel.tensormap, got {t}")
        for what in ("grid", "block", "cluster"):
            dims = self.attributes.get(what, (1, 1, 1))
            if len(dims) != 3 or any(not isinstance(d, int) or isinstance(d, bool) or d <= 0 for d in dims):
                raise self.error(f"'{what}' must be 1 to 3 positive integers, got {list(dims)}")
        if "cluster" in self.attributes:
            self._verify_cluster()
        limit = target().max_threads
        if self.threads > limit:
            raise self.error(f"has {self.threads} threads per block; the limit is {limit}")
        if self.attributes.get("index_bits", 32) not in (32, 64):
            raise self.error("'index_bits' must be 32 or 64")
        if self.parent_op is not None and self.parent_op.name != "builtin.module":
            raise self.error("must be at the top level of a module")

    def _verify_cluster(self) -> None:
        cluster, grid = self.attributes["cluster"], self.attributes["grid"]
        if any(g % c for g, c in zip(grid, cluster)):
            raise self.error(f"its grid {list(grid)} is no multiple of its cluster {list(cluster)}")
        if math.prod(cluster) > CLUSTER_LIMIT:
            raise self.error(f"clusters of {math.prod(cluster)} blocks; the portable limit is {CLUSTER_LIMIT}")
        if target().sm < 90:
            raise self.error(f"is launched in clusters, which need sm_90 or later; the target is {target().arch}")

    def print_custom(self, p):
        p.write("kernel.func ", str(SymbolRef(self.attributes["sym_name"])), "(")
        p.write(", ".join(f"{p.define(a)}: {a.type}" for a in self.body.args), ")")
        p.write(" grid(", dims_text(self.attributes["grid"]), ") block(", dims_text(self.attributes["block"]), ")")
        if "cluster" in self.attributes:
            p.write(" cluster(", dims_text(self.attributes["cluster"]), ")")
        elide = ("sym_name", "function_type", "grid", "block", "cluster")
        p.attr_dict(self.attributes, elide=elide, prefix=" attributes ")
        p.write(" ")
        p.region(self.regions[0], print_entry_args=False)


# ---- ops of no operands and no results -------------------------------------------------------------------------
class BareOp(KernelOp):
    """An op of no operands and no results: a fence, a barrier, a commit; printed as its name."""

    operand_names = ()
    result_names = ()
    num_regions = 0

    def print_custom(self, p):
        p.write(self.name)


class GroupWaitOp(BareOp):
    """Wait until at most `pending` committed groups (of cp.async copies, of wgmmas) are in flight."""

    attribute_types = {"pending": int}

    def verify_op(self):
        if not 0 <= self.attributes["pending"] <= 7:
            raise self.error("pending must be 0 to 7")

    def print_custom(self, p):
        p.write(f"{self.name} {self.attributes['pending']}")
