"""Verification: each op's declared shape (arity, attributes, regions, traits) and its own `verify_`, plus the
module-wide rules: SSA values defined before use, no use across an isolated-from-above op, unique symbols."""

from __future__ import annotations

import functools

from .attributes import UNIT
from .diagnostics import IRForgeError
from .ir import BlockArgument, Operation, OpResult
from .printer import format_attr


def verify(root: Operation) -> None:
    """Raise `IRForgeError` at the first broken rule (ops checked in order, parents before children)."""
    positions: dict[Operation, int] = {}
    for op in root.walk():
        blk = op.parent
        if blk is not None and op not in positions:
            for i, o in enumerate(blk.ops):
                positions[o] = i
    for op in root.walk():
        _verify_structure(op)
        _verify_operands(op, positions)
        if "symbol_table" in op.traits:
            _verify_symbols(op)
        if "tune" in op.attributes:
            from .pipeline import tune_overrides

            tune_overrides(op)
        op.verify_()


def _verify_structure(op: Operation) -> None:
    cls = type(op)
    if cls.operand_names is not None:
        _check_arity(op, "operand", cls.operand_names, len(op.operands))
    if cls.result_names is not None:
        _check_arity(op, "result", cls.result_names, len(op.results))
    for name, expected in cls.attribute_types.items():
        if name not in op.attributes:
            raise op.error(f"requires attribute '{name}'")
        _check_attr(op, name, expected)
    for name, expected in cls.optional_attributes.items():
        if name in op.attributes:
            _check_attr(op, name, expected)
    if cls.num_regions is not None and len(op.regions) != cls.num_regions:
        raise op.error(f"expects {cls.num_regions} region(s), got {len(op.regions)}")
    traits = op.traits
    for region in op.regions:
        if "single_block" in traits and len(region.blocks) != 1:
            raise op.error(f"expects a single block in each region, got {len(region.blocks)}")
        for block in region.blocks:
            for inner in block.ops[:-1]:
                if "terminator" in inner.traits:
                    raise inner.error("must be the last op of its block")
    if "terminator" in traits and op.parent is not None and op.parent.ops[-1] is not op:
        raise op.error("must be the last op of its block")


@functools.cache
def _arity(names: tuple[str, ...]) -> tuple[bool, int]:
    """(variadic, fixed count) of an op class's operand or result names."""
    variadic = any(x.startswith("*") for x in names)
    return variadic, len(names) - variadic


def _check_arity(op: Operation, what: str, names, n: int) -> None:
    variadic, fixed = _arity(tuple(names))
    if (n != fixed) if not variadic else (n < fixed):
        need = f"at least {fixed}" if variadic else str(fixed)
        raise op.error(f"expects {need} {what}(s), got {n}")


def _check_attr(op: Operation, name: str, expected) -> None:
    value = op.attributes[name]
    if expected is None:
        return
    types = expected if isinstance(expected, tuple) else (expected,)
    for t in types:
        if (
            (value is UNIT)
            if t is type(UNIT)
            else (isinstance(value, t) and not (t is int and isinstance(value, bool)))
        ):
            return
    want = " or ".join(t.__name__ for t in types)
    raise op.error(f"attribute '{name}' must be {want}, got {format_attr(value)}")


def _verify_operands(op: Operation, positions) -> None:
    for i, v in enumerate(op.operands):
        if isinstance(v, OpResult):
            def_block, def_op = v.op.parent, v.op
        elif isinstance(v, BlockArgument):
            def_block, def_op = v.block, None
        else:
            raise op.error(f"operand #{i} is not an op result or block argument")
        # Walk up from the user to the block that defines the value; the op found there must come after the def.
        cur, crossed = op, None
        while cur is not None and cur.parent is not def_block:
            cur = cur.parent_op
            if cur is not None and crossed is None and "isolated" in cur.traits:
                crossed = cur  # the value is used inside this op's regions but defined outside them
        if cur is None or def_block is None:
            raise op.error(f"operand #{i} uses a value that is not defined in an enclosing scope")
        if crossed is not None:
            raise op.error(f"operand #{i} uses a value defined outside '{crossed.name}', which is isolated from above")
        if def_op is not None and (def_op is cur or positions.get(def_op, -1) >= positions.get(cur, -1)):
            raise op.error(f"operand #{i} is used before it is defined")


def _verify_symbols(op: Operation) -> None:
    seen: dict[str, Operation] = {}
    for region in op.regions:
        for block in region.blocks:
            for inner in block.ops:
                sym = inner.attributes.get("sym_name")
                if isinstance(sym, str):
                    if sym in seen:
                        raise inner.error(f"redefines symbol '@{sym}'", notes=[("first defined here", seen[sym].loc)])
                    seen[sym] = inner


def verify_or_raise(root: Operation, context: str) -> None:
    """Verify, prefixing any failure with `context` (e.g. "after pass 'cse'")."""
    try:
        verify(root)
    except IRForgeError as e:
        d = e.diagnostics[0]
        d.message = f"{d.message} ({context})"
        raise
