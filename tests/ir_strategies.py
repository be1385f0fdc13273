"""Hypothesis strategies for IR: types, attributes, locations, index expressions and whole modules.

Modules mix unregistered generic ops (odd names, nested regions with several blocks and block arguments) with the
builtin, func and test dialects' custom syntax, and give values odd name hints (duplicates, unicode, digits), so
that printing has to rename and quote. Every generated module verifies.
"""

from __future__ import annotations

import string

from hypothesis import strategies as st

from irforge import index_expr as ix
from irforge.attributes import UNIT, DictAttr, SymbolRef
from irforge.builtin import CallOp, FuncOp, ModuleOp, ReturnOp
from irforge.ir import Block, Operation, Region
from irforge.location import FileLineColLoc, NameLoc, UnknownLoc, fuse
from irforge.registry import registry
from irforge.types import SCALAR_NAMES, FunctionType, OpaqueType, ScalarType, TensorType, index

# ---- text ------------------------------------------------------------------------------------------------------
IDENT_CHARS = string.ascii_letters + string.digits + "_$.-"
identifiers = st.builds(
    lambda head, tail: head + tail,
    st.sampled_from(string.ascii_letters + "_"),
    st.text(IDENT_CHARS, max_size=8),
)
# Characters that need escaping or are easy to get wrong: quotes, backslashes, controls, separators, surrogates.
_TRICKY = [
    '"',
    "\\",
    "\n",
    "\t",
    "\r",
    "\x00",
    "\x1f",
    "\x7f",
    "\x85",
    "\u2028",
    "\u2029",
    "\ud800",
    "\udfff",
    "é",
    "✓",
]
odd_text = st.text(st.sampled_from(_TRICKY) | st.characters(), max_size=10)
names = identifiers | odd_text

# ---- types -----------------------------------------------------------------------------------------------------
scalar_types = st.sampled_from(SCALAR_NAMES).map(ScalarType)
tensor_types = st.builds(
    TensorType,
    scalar_types,
    st.lists(st.integers(0, 4096) | st.sampled_from([0, 1, 2**31, 2**63]), max_size=4).map(tuple),
)
dialect_type_names = st.builds(
    lambda head, tail: head + tail,
    st.sampled_from(string.ascii_letters + "_"),
    st.text(string.ascii_letters + string.digits + "_$.", max_size=8),
)


def types(attrs=None):
    """Value types: scalars, tensors (rank 0 included) and dialect types whose parameters are attributes."""
    params = attrs if attrs is not None else st.integers(-3, 3) | scalar_types
    simple = scalar_types | tensor_types
    return simple | st.builds(OpaqueType, dialect_type_names, st.lists(params, max_size=3).map(tuple))


# ---- attributes ------------------------------------------------------------------------------------------------
ints = st.integers() | st.integers(-(2**300), 2**300) | st.sampled_from([0, -1, 2**63 - 1, -(2**63), 2**64])
floats = st.floats() | st.sampled_from(
    [float("inf"), float("-inf"), float("nan"), -0.0, 0.0, 5e-324, -5e-324, 1e308, 1.7976931348623157e308, 1e16, 0.1]
)
symbols = st.builds(SymbolRef, names)


def index_exprs(num_dims: int, max_leaves: int = 8):
    leaves = st.integers(-100, 100).map(ix.Const)
    if num_dims:
        leaves = leaves | st.integers(0, num_dims - 1).map(ix.Dim)
    divisors = st.integers(1, 100).map(ix.Const)  # the verifier takes positive constant divisors only

    def extend(sub):
        binary = st.sampled_from([ix.Add, ix.Sub, ix.Mul, ix.Min, ix.Max])
        division = st.sampled_from([ix.FloorDiv, ix.CeilDiv, ix.Mod])
        return st.builds(lambda k, a, b: k(a, b), binary, sub, sub) | st.builds(
            lambda k, a, b: k(a, b), division, sub, divisors
        )

    return st.recursive(leaves, extend, max_leaves=max_leaves)


@st.composite
def affine_maps(draw):
    n = draw(st.integers(0, 4))
    return ix.AffineMap(n, tuple(draw(st.lists(index_exprs(n), max_size=4))))


function_types = st.builds(
    FunctionType, st.lists(types(), max_size=3).map(tuple), st.lists(types(), max_size=3).map(tuple)
)
# sym_name makes an op a symbol (keep symbols unique); the verifier checks a `tune` attribute against the passes
dict_keys = names.filter(lambda k: k not in ("sym_name", "tune"))


def attributes():
    """Every attribute kind, nested through lists, dictionaries and dialect type parameters."""
    leaves = (
        ints
        | floats
        | st.booleans()
        | st.just(UNIT)
        | st.none()
        | names
        | scalar_types
        | tensor_types
        | symbols
        | affine_maps()
        | function_types
    )
    return st.recursive(
        leaves,
        lambda sub: (
            st.lists(sub, max_size=3).map(tuple)
            | st.dictionaries(dict_keys, sub, max_size=3).map(DictAttr)
            | st.builds(OpaqueType, dialect_type_names, st.lists(sub, max_size=2).map(tuple))
        ),
        max_leaves=10,
    )


attr_dicts = st.dictionaries(dict_keys, attributes(), max_size=3)


# ---- locations -------------------------------------------------------------------------------------------------
def locations():
    file_locs = st.builds(FileLineColLoc, names, st.integers(0, 10**6), st.integers(0, 10**4))
    known = st.recursive(
        file_locs | st.builds(NameLoc, names),
        lambda sub: st.builds(NameLoc, names, sub) | st.lists(sub, min_size=2, max_size=3).map(fuse),
        max_leaves=4,
    )
    return known.filter(lambda loc: not isinstance(loc, UnknownLoc))


# ---- modules ---------------------------------------------------------------------------------------------------
name_hints = st.none() | identifiers | odd_text | st.sampled_from(["x", "x_1", "0", "12", "arg0", "v"])


def _unregistered(name: str) -> bool:
    return registry().op_class(name) is None


generic_op_names = (
    st.builds(lambda d, o: f"{d}.{o}", dialect_type_names, identifiers) | odd_text | st.sampled_from(["", "x", "a.b.c"])
).filter(_unregistered)


class _ModuleBuilder:
    """Draws ops into blocks, keeping track of the values each position may use."""

    def __init__(self, draw, max_depth: int, with_locs: bool):
        self.draw = draw
        self.max_depth = max_depth
        self.with_locs = with_locs
        self.symbols: set[str] = set()
        self.value_types = types()

    def loc(self):
        return self.draw(locations()) if self.with_locs else self.draw(st.none() | locations()) or UnknownLoc()

    def hint(self, values):
        for v in values:
            v.name_hint = self.draw(name_hints)

    def operands(self, visible, max_size=3):
        if not visible:
            return []
        return self.draw(st.lists(st.sampled_from(visible), max_size=max_size))

    def fill(self, block: Block, visible: list, depth: int, in_func: bool = False) -> None:
        visible = [*visible, *block.args]
        kinds = ["generic", "pure", "constant", "effect", "call"]
        if depth < self.max_depth:
            kinds += ["generic_regions", "loop", "func"]
        for _ in range(self.draw(st.integers(0, 4))):
            op = self.op(self.draw(st.sampled_from(kinds)), visible, depth)
            block.append(op)
            visible.extend(op.results)

    def op(self, kind: str, visible: list, depth: int) -> Operation:
        draw = self.draw
        loc = self.loc()
        if kind in ("generic", "generic_regions"):
            regions = []
            if kind == "generic_regions":
                for _ in range(draw(st.integers(1, 2))):
                    region = Region()
                    for _ in range(draw(st.integers(0, 3))):
                        block = region.add_block(Block(draw(st.lists(self.value_types, max_size=2))))
                        self.hint(block.args)
                        self.fill(block, visible, depth + 1)
                    regions.append(region)
            op = Operation(
                self.operands(visible),
                draw(st.lists(self.value_types, max_size=3)),
                draw(attr_dicts),
                regions,
                loc,
                name=draw(generic_op_names),
            )
        elif kind == "pure":
            op = registry().op_class("test.pure")(
                self.operands(visible), [draw(self.value_types)], draw(attr_dicts), loc=loc
            )
        elif kind == "constant":
            value = draw(ints | floats | st.booleans())
            op = registry().op_class("test.constant")([], [draw(self.value_types)], {"value": value}, loc=loc)
        elif kind == "effect":
            op = registry().op_class("test.effect")(self.operands(visible), [], draw(attr_dicts), loc=loc)
        elif kind == "call":
            op = CallOp(
                self.operands(visible), draw(st.lists(self.value_types, max_size=2)), {"callee": draw(symbols)}, loc=loc
            )
        elif kind == "loop":
            lo = draw(st.integers(0, 2**70))
            attrs = {**draw(attr_dicts), "lower": lo, "upper": lo + draw(st.integers(0, 100))}
            body = Block([index])
            self.hint(body.args)
            self.fill(body, visible, depth + 1)
            if draw(st.booleans()):
                body.append(registry().op_class("test.yield")(loc=self.loc()))
            op = registry().op_class("test.loop")([], [], attrs, [Region([body])], loc)
        else:  # func: isolated from above, so its body sees only its arguments
            name = draw(names.filter(lambda n: n not in self.symbols))
            self.symbols.add(name)
            func = FuncOp.build(name, draw(st.lists(self.value_types, max_size=3)), [], attributes=draw(attr_dicts))
            func.loc = loc
            self.hint(func.body.args)
            self.fill(func.body, [], depth + 1)
            inner = [*func.body.args, *(r for o in func.body.ops for r in o.results)]
            returned = self.operands(inner)
            func.body.append(ReturnOp(returned, [], loc=self.loc()))
            ft = func.attributes["function_type"]
            func.attributes["function_type"] = FunctionType(ft.inputs, tuple(v.type for v in returned))
            op = func
        self.hint(op.results)
        return op


@st.composite
def modules(draw, max_depth: int = 3, with_locs: bool = False):
    """A verified module; `with_locs` gives every op a known location (for round trips with debug info)."""
    attrs = draw(st.dictionaries(dict_keys, attributes(), max_size=2)) if draw(st.booleans()) else {}
    module = ModuleOp(attributes=attrs)
    if with_locs:
        module.loc = draw(locations())
    _ModuleBuilder(draw, max_depth, with_locs).fill(module.body, [], 0)
    return module
