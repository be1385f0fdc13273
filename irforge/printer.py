"""The IR printer: custom syntax where an op has one, MLIR's generic form otherwise (or always, with `generic`).

Value names come from the values' hints (the names in the parsed text, or what a pass chose), made unique within
each isolated-from-above op; values without a hint are numbered `%0, %1, ...`. Printing parsed text gives the same
text back, so `print(parse(t)) == t` for every printed `t`.

A custom printer writes through `Printer.write` and the helpers below (`value`, `type`, `attr`, `region`, ...).
"""

from __future__ import annotations

import json
import math
import re
from contextlib import contextmanager, nullcontext

from .attributes import UNIT, DictAttr, SymbolRef, _Unit
from .index_expr import AffineMap
from .ir import Block, Operation, Region, Value
from .location import UnknownLoc
from .types import Type

_BARE_ID = re.compile(r"[A-Za-z_$.][A-Za-z0-9_$.\-]*\Z")
_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_$.\-]*\Z")
_BARE_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_$.\-]*\Z")
# Words the attribute grammar reads as values; such dictionary keys are quoted.
_KEYWORDS = frozenset({"true", "false", "unit", "none", "inf", "nan", "loc", "affine_map", "min", "max"})


# Kept readable (UTF-8), but escaped where a raw character would break lines or files: controls, line and paragraph
# separators that `str.splitlines` honours, and lone surrogates (not encodable as UTF-8).
_ESCAPE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def format_string(s: str) -> str:
    return _ESCAPE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", json.dumps(s, ensure_ascii=False))


def format_symbol(name: str) -> str:
    return "@" + (name if _BARE_SYMBOL.match(name) else format_string(name))


def format_float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(x)


def format_key(k: str) -> str:
    return k if _BARE_KEY.match(k) and k not in _KEYWORDS else format_string(k)


def format_attr(a) -> str:
    if a is None:
        return "none"
    if a is True:
        return "true"
    if a is False:
        return "false"
    if isinstance(a, int):
        return str(a)
    if isinstance(a, float):
        return format_float(a)
    if isinstance(a, str):
        return format_string(a)
    if isinstance(a, tuple):
        return "[" + ", ".join(format_attr(x) for x in a) + "]"
    if isinstance(a, DictAttr):
        return format_dict(a)
    if isinstance(a, _Unit):
        return "unit"
    if isinstance(a, (Type, SymbolRef, AffineMap)):
        return str(a)
    raise TypeError(f"cannot print attribute {a!r}")


def format_dict(d) -> str:
    items = sorted(d.items()) if not isinstance(d, DictAttr) else d.items()
    return (
        "{" + ", ".join(format_key(k) if v is UNIT else f"{format_key(k)} = {format_attr(v)}" for k, v in items) + "}"
    )


def format_types(types) -> str:
    return ", ".join(str(t) for t in types)


def format_function_type(inputs, outputs) -> str:
    outs = str(outputs[0]) if len(outputs) == 1 else f"({format_types(outputs)})"
    return f"({format_types(inputs)}) -> {outs}"


class _Scope:
    __slots__ = ("names", "next_id", "parent", "used")

    def __init__(self, parent):
        self.names: dict[Value, str] = {}
        self.used: set[str] = set()
        self.next_id = 0
        self.parent = parent


class Printer:
    """Prints ops. `names` pins names (`{value: "%x"}`, from an earlier printer's `assigned`): those values keep
    them where no other value of their scope took them first, and new values avoid them, so two printings of a module
    before and after a pass differ only where the pass changed something, not where it shifted the numbering."""

    def __init__(
        self, *, generic: bool = False, debuginfo: bool = False, indent_width: int = 2, names: dict | None = None
    ):
        self.generic = generic
        self.debuginfo = debuginfo
        self.indent_width = indent_width
        self._out: list[str] = []
        self._indent = 0
        self._scope = _Scope(None)
        self._pinned = names or {}
        self._reserved: set[str] = set()  # the pinned names of the values being printed
        self.assigned: dict[Value, str] = {}  # every value's name, as printed

    # ---- entry points -------------------------------------------------------------------------------------------
    def module_to_string(self, module: Operation) -> str:
        """A module prints as its top-level ops; it is explicit when it carries attributes or a location, or holds
        just one module (which would otherwise read back as the top-level module itself)."""
        self._out = []
        self._reserve(module)
        if (
            module.name == "builtin.module"
            and not module.attributes
            and not self._loc_visible(module)
            and not (
                len(module.regions[0].blocks) == 1
                and len(module.body.ops) == 1
                and module.body.ops[0].name == "builtin.module"
            )
        ):
            for op in module.body.ops:
                self.print_op(op)
                self._out.append("\n")
        else:
            self.print_op(module)
            self._out.append("\n")
        return "".join(self._out)

    def op_to_string(self, op: Operation) -> str:
        self._out = []
        self._reserve(op)
        self.print_op(op)
        return "".join(self._out)

    def _reserve(self, root: Operation) -> None:
        if self._pinned:
            defined = (
                v
                for op in root.walk()
                for v in (*op.results, *(a for r in op.regions for b in r.blocks for a in b.args))
            )
            self._reserved = {self._pinned[v][1:] for v in defined if v in self._pinned}

    # ---- writing helpers for custom printers --------------------------------------------------------------------
    def write(self, *parts: str) -> None:
        self._out.extend(parts)

    def newline(self) -> None:
        self._out.append("\n" + " " * (self._indent * self.indent_width))

    def value(self, v: Value) -> str:
        """`%name` of a value, naming it on first sight."""
        s = self._scope
        while s is not None:
            name = s.names.get(v)
            if name is not None:
                return name
            s = s.parent
        return self._define(v)

    def values(self, vs) -> str:
        return ", ".join(self.value(v) for v in vs)

    def type(self, t: Type) -> str:
        return str(t)

    def types(self, ts) -> str:
        return format_types(ts)

    def attr(self, a) -> str:
        return format_attr(a)

    def attr_dict(self, attrs, elide=(), prefix: str = " ") -> None:
        """Write ` {k = v, ...}` for the attributes not in `elide` (nothing when none are left)."""
        rest = {k: v for k, v in attrs.items() if k not in elide}
        if rest:
            self.write(prefix, format_dict(rest))

    def index_expr(self, expr, operands) -> str:
        """An index expression whose dimension `i` stands for SSA value `operands[i]`."""
        return expr.format(lambda i: self.value(operands[i]))

    def region(self, region: Region, *, print_entry_args: bool = True) -> None:
        """Write `{`, the blocks indented, `}`; the entry block's arguments may be elided by custom syntax.

        `{}` reads back as a region without blocks, or as one empty block for a `single_block` op; any other
        region whose only block is empty spells that block out as `^bb0:`.
        """
        empty_entry = (
            len(region.blocks) == 1
            and not region.blocks[0].ops
            and not region.blocks[0].args
            and not (region.parent is not None and region.parent.has_trait("single_block"))
        )
        with self.scope():
            self.write("{")
            self._indent += 1
            for i, block in enumerate(region.blocks):
                if i > 0 or len(region.blocks) > 1 or (print_entry_args and block.args) or empty_entry:
                    self._out.append("\n" + " " * ((self._indent - 1) * self.indent_width))
                    self._block_header(block, i)
                for op in block.ops:
                    self.newline()
                    self.print_op(op)
            self._indent -= 1
            self.newline()
            self.write("}")

    @contextmanager
    def scope(self, isolated: bool = False):
        """Names defined inside are forgotten at exit, so sibling regions may reuse them (values defined in a region
        are not visible after it). Every op with regions and every region opens one. Anonymous values keep counting
        up across a nested scope (`%3` after a loop whose body used `%1`, `%2`), except in an isolated-from-above
        op, whose values are numbered from `%0`."""
        outer = self._scope
        inner = _Scope(outer)
        inner.used = set(outer.used)
        inner.next_id = 0 if isolated else outer.next_id
        self._scope = inner
        try:
            yield
        finally:
            self._scope = outer
            if not isolated:
                outer.next_id = max(outer.next_id, inner.next_id)

    def define(self, v: Value) -> str:
        """Name a value being defined here (block arguments in custom headers)."""
        return self.value(v)

    # ---- ops ----------------------------------------------------------------------------------------------------
    def print_op(self, op: Operation) -> None:
        if op.results:
            self.write(", ".join(self.define(r) for r in op.results), " = ")
        # An op with regions gets its own naming scope, so block arguments a custom header declares are released
        # after the op exactly as the generic form's `^bb0(...)` ones are: both forms then name everything alike.
        with self.scope(isolated=op.has_trait("isolated")) if op.regions else nullcontext():
            if op.print_custom is not None and not self.generic:
                op.print_custom(self)
            else:
                self.print_generic(op)
        if self._loc_visible(op):
            self.write(" ", str(op.loc))

    def print_generic(self, op: Operation) -> None:
        self.write(format_string(op.name), "(", self.values(op.operands), ")")
        if op.regions:
            self.write(" (")
            for i, r in enumerate(op.regions):
                if i:
                    self.write(", ")
                self.region(r)
            self.write(")")
        self.attr_dict(op.attributes)
        self.write(" : ", format_function_type([v.type for v in op.operands], [r.type for r in op.results]))

    def _loc_visible(self, op: Operation) -> bool:
        return self.debuginfo and not isinstance(op.loc, UnknownLoc)

    def _block_header(self, block: Block, index: int) -> None:
        self.write(f"^bb{index}")
        if block.args:
            self.write("(", ", ".join(f"{self.define(a)}: {a.type}" for a in block.args), ")")
        self.write(":")

    def _define(self, v: Value) -> str:
        s = self._scope
        hint = v.name_hint
        pinned = self._pinned.get(v)
        taken = s.used | self._reserved if self._reserved else s.used
        if pinned is not None and pinned[1:] not in s.used:
            name = pinned[1:]
        elif hint and not hint.isdigit():
            base = hint if _BARE_ID.match(hint) else _sanitize(hint)
            name, k = base, 0
            while name in taken:
                k += 1
                name = f"{base}_{k}"
        else:
            while str(s.next_id) in taken:
                s.next_id += 1
            name = str(s.next_id)
            s.next_id += 1
        s.used.add(name)
        s.names[v] = self.assigned[v] = "%" + name
        return "%" + name


def _sanitize(hint: str) -> str:
    out = re.sub(r"[^A-Za-z0-9_$.\-]", "_", hint)
    return out if out and not out[0].isdigit() and out[0] != "-" else "v" + out


def print_module(module: Operation, *, generic: bool = False, debuginfo: bool = False) -> str:
    return Printer(generic=generic, debuginfo=debuginfo).module_to_string(module)
