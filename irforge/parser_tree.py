"""The light syntax tree the parser builds before names are resolved: `OpAST` and its parts."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import index_expr as ix
from .diagnostics import error
from .index_expr import IndexExpr
from .location import UNKNOWN, Location


# ---- the syntax tree -------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ValueRef:
    """`%name` as written, with where it was written."""

    name: str
    loc: Location


@dataclass(eq=False)
class BlockAST:
    args: list[tuple[ValueRef, object]] = field(default_factory=list)  # (name, type)
    ops: list[OpAST] = field(default_factory=list)
    label: str | None = None


@dataclass(eq=False)
class RegionAST:
    blocks: list[BlockAST] = field(default_factory=list)

    def with_entry_args(self, args) -> RegionAST:
        """The region with `args` [(ValueRef, type)] as its entry block's arguments (custom headers declare them)."""
        if not self.blocks:
            self.blocks.append(BlockAST())
        entry = self.blocks[0]
        if entry.args:
            raise error("block arguments are declared by the op; the region must not repeat them", args[0][0].loc)
        entry.args = list(args)
        return self


@dataclass(eq=False)
class OpAST:
    """An op as written, before names are resolved. Custom syntaxes build one of these."""

    name: str
    operands: list[ValueRef] = field(default_factory=list)
    attrs: dict = field(default_factory=dict)
    result_types: list | None = None  # None: the op class infers them
    regions: list[RegionAST] = field(default_factory=list)
    operand_types: list | None = None  # the generic form states them; checked against the operands
    results: list[ValueRef] = field(default_factory=list)
    loc: Location = UNKNOWN


@dataclass(frozen=True, slots=True)
class ValueLeaf(IndexExpr):
    """An SSA value inside an index expression, before `bind_index_values` turns it into a dimension."""

    ref: ValueRef

    def format(self, leaf=None) -> str:
        return f"%{self.ref.name}"


def bind_index_values(exprs, loc: Location = UNKNOWN) -> tuple[list[IndexExpr], list[ValueRef]]:
    """Number the SSA values in `exprs` by first appearance: value leaves become `Dim(i)`, refs come back in order."""
    refs: list[ValueRef] = []
    slot: dict[str, int] = {}

    def go(e: IndexExpr) -> IndexExpr:
        if isinstance(e, ValueLeaf):
            if e.ref.name not in slot:
                slot[e.ref.name] = len(refs)
                refs.append(e.ref)
            return ix.Dim(slot[e.ref.name])
        if isinstance(e, ix.Dim):
            raise error(f"'d{e.index}' is not a value here; index expressions in ops use SSA values", loc)
        kids = e.children()
        return e.rebuild([go(k) for k in kids]) if kids else e

    for e in exprs:
        div = ix.bad_division(e)
        if div is not None:  # located at a value it divides, when the caller knows no better place
            at = next((x.ref.loc for x in _leaves(div) if isinstance(x, ValueLeaf)), loc) if loc is UNKNOWN else loc
            raise error(f"'{div}' divides by {div.rhs}: divisors must be positive constants", at)
    return [go(e) for e in exprs], refs


def _leaves(e: IndexExpr):
    kids = e.children()
    if not kids:
        yield e
    for k in kids:
        yield from _leaves(k)
