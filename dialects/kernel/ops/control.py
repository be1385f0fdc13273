"""Structured control flow: `kernel.for` (loop-carried values as block arguments), `kernel.if`, `kernel.yield`."""

from __future__ import annotations

from irforge.index_expr import AffineMap
from irforge.ir import Block, Value
from irforge.types import boolean, index

from .base import IndexedOp, KernelOp
from .geometry import LAUNCH_AXES


class YieldOp(KernelOp):
    """Ends a `kernel.for` body (the next values of its carries) or a `kernel.if` branch (its results)."""

    name = "kernel.yield"
    operand_names = ("*values",)
    result_names = ()
    num_regions = 0
    traits = frozenset({"terminator"})

    def verify_op(self):
        if not isinstance(self.parent_op, (ForOp, IfOp)):
            raise self.error("must end a kernel.for or kernel.if region")

    def print_custom(self, p):
        p.write("kernel.yield")
        if self.operands:
            p.write(" ", p.values(self.operands))


def _check_yield(op, block: Block, types, what: str) -> None:
    y = block.ops[-1] if block.ops and isinstance(block.ops[-1], YieldOp) else None
    got = tuple(v.type for v in y.values) if y is not None else ()
    if got != tuple(types):
        raise op.error(f"{what} must yield ({', '.join(map(str, types))}), yields ({', '.join(map(str, got))})")


class ForOp(IndexedOp):
    """A counted loop `for (i = lower; i < upper; i += step)`; bounds are index expressions. Loop-carried values
    (accumulators, register tiles) enter as `carry(%acc <- %init : type)`, are the body's block arguments after the
    induction variable, and leave as the op's results."""

    name = "kernel.for"
    operand_names = ("*bounds_and_inits",)
    attribute_types = {"lower": AffineMap, "upper": AffineMap, "step": int}
    optional_attributes = {"unroll": int}
    num_regions = 1
    traits = frozenset({"single_block"})
    index_groups = ("lower", "upper")

    @property
    def inits(self) -> tuple[Value, ...]:
        return self.operands[len(self.index_operands) :]

    @property
    def induction_var(self) -> Value:
        return self.body.args[0]

    @property
    def carries(self):
        return self.body.args[1:]

    def group_sizes(self):
        return {"lower": 1, "upper": 1}

    def verify_op(self):
        self.verify_indices()
        if self.attributes["step"] <= 0:
            raise self.error("step must be positive")
        if self.attributes.get("unroll", 1) < 0:
            raise self.error("unroll must be non-negative (0: fully)")
        args = self.body.args
        types = tuple(v.type for v in self.inits)
        if not args or args[0].type != index or tuple(a.type for a in args[1:]) != types:
            raise self.error("body arguments must be the index induction variable and one per carry")
        if tuple(r.type for r in self.results) != types:
            raise self.error("results must match the carries")
        _check_yield(self, self.body, types, "body")

    def print_custom(self, p):
        a = self.attributes
        p.write("kernel.for ", p.define(self.induction_var), " in ", self.fmt(p, "lower"), " .. ")
        p.write(self.fmt(p, "upper"))
        if a["step"] != 1:
            p.write(f" step {a['step']}")
        if self.inits:
            parts = [f"{p.define(c)} <- {p.value(v)} : {c.type}" for c, v in zip(self.carries, self.inits)]
            p.write(" carry(", ", ".join(parts), ")")
        p.attr_dict(a, elide=("lower", "upper", "step"), prefix=" attributes ")
        p.write(" ")
        p.region(self.regions[0], print_entry_args=False)


class IfOp(KernelOp):
    """`if (cond) { ... } else { ... }`; with results, both branches end in `kernel.yield`.

    `single_writer = ["threadIdx.x", ...]` marks the guard of the tile level's single-writer rule: the condition
    picks one thread per group of threads that differ only along those axes, and its then-branch does what each of
    them would do (store a value they share). The simulator checks that they agree on what the branch uses."""

    name = "kernel.if"
    operand_names = ("cond",)
    optional_attributes = {"single_writer": tuple}
    num_regions = 2
    traits = frozenset({"single_block"})

    def verify_op(self):
        if self.cond.type != boolean:
            raise self.error(f"condition must be bool, got {self.cond.type}")
        axes = self.attributes.get("single_writer", ())
        if any(a not in LAUNCH_AXES for a in axes) or len(set(axes)) != len(axes):
            raise self.error(f"single_writer names launch axes ({', '.join(LAUNCH_AXES)}), each once; got {list(axes)}")
        types = tuple(r.type for r in self.results)
        _check_yield(self, self.regions[0].block, types, "then branch")
        _check_yield(self, self.regions[1].block, types, "else branch")

    def print_custom(self, p):
        p.write("kernel.if ", p.value(self.cond))
        if self.results:
            p.write(" -> (", p.types(r.type for r in self.results), ")")
        p.attr_dict(self.attributes, prefix=" attributes ")
        p.write(" ")
        p.region(self.regions[0])
        if self.regions[1].block.ops:
            p.write(" else ")
            p.region(self.regions[1])
