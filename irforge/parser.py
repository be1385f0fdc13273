"""Parsing textual IR: lark (LALR) turns text into a light syntax tree of `OpAST`s, then one resolver builds the IR.

The grammar is the core grammar (`core.lark`) with every loaded dialect's grammar appended; each dialect also
contributes a syntax mixin whose methods (named after its grammar rules) turn its custom forms into the same
`OpAST` the generic form produces. Custom syntax is therefore sugar: SSA names, scopes, regions, type checks and
verification are handled once, here, for every dialect.
"""

from __future__ import annotations

import gc
import hashlib
import json
import pickle
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from lark import Lark, Token, Transformer
from lark import __version__ as lark_version
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from . import index_expr as ix
from .attributes import UNIT, DictAttr, SymbolRef
from .cache import atomic_write as _atomic_write
from .cache import cache_root
from .diagnostics import IRForgeError, decode_source, error, register_source
from .index_expr import AffineMap, IndexExpr
from .ir import Block, Operation, Region, Value
from .lalr import FastLALR, NestedTooDeeply, SyntaxFallback
from .location import UNKNOWN, FileLineColLoc, Location, NameLoc, fuse
from .types import SCALAR_NAMES, FunctionType, OpaqueType, ScalarType, TensorType


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


_SCALARS = {name: ScalarType(name) for name in SCALAR_NAMES}


def _tok_loc(t: Token, file: str) -> FileLineColLoc:
    return FileLineColLoc(file, t.line, t.column)


# ---- the core syntax -------------------------------------------------------------------------------------------
class CoreSyntax(Transformer):
    """Callbacks for the core grammar's rules; dialect syntax mixins add theirs."""

    __visit_tokens__ = False
    file = "<input>"

    def ref(self, tok: Token) -> ValueRef:
        """A `ValueRef` for a VALUE_ID token: use this in dialect callbacks."""
        return ValueRef(tok[1:], FileLineColLoc(self.file, tok.line, tok.column))

    def loc_of(self, tok: Token) -> FileLineColLoc:
        return _tok_loc(tok, self.file)

    def string(self, tok: Token) -> str:
        """The value of a STRING token: use this in dialect callbacks."""
        if "\\" not in tok:  # nothing to unescape (the common case)
            return tok[1:-1]
        return _unquote(tok, self.loc_of(tok))

    # ops
    def op(self, c):
        explicit = c[-1] if isinstance(c[-1], Location) else None
        ast = c[-2] if explicit is not None else c[-1]
        if isinstance(c[0], list):
            ast.results = c[0]
        if explicit is not None:
            ast.loc = explicit
        elif ast.results:  # an op's position is where its line starts: its first result name
            ast.loc = ast.results[0].loc
        return ast

    def result_names(self, c):
        return [self.ref(t) for t in c]

    def generic_op(self, c):
        name_tok, uses, regions, attrs, (ins, outs) = c
        return OpAST(
            name=self.string(name_tok),
            operands=uses or [],
            attrs=dict(attrs) if attrs else {},
            result_types=outs,
            regions=regions or [],
            operand_types=ins,
            loc=self.loc_of(name_tok),
        )

    def generic_regions(self, c):
        return list(c)

    def value_uses(self, c):
        return list(c)

    def value_use(self, c):
        return self.ref(c[0])

    def region(self, c):
        entry = BlockAST(ops=[x for x in c if isinstance(x, OpAST)])
        blocks = [x for x in c if isinstance(x, BlockAST)]
        # `{}` is a region without blocks; the builder gives a `single_block` op its one empty block.
        return RegionAST([entry, *blocks] if entry.ops else blocks)

    def block(self, c):
        label, args, *ops = c
        return BlockAST(args=args or [], ops=ops, label=str(label)[1:])

    def block_args(self, c):
        return list(c)

    def block_arg(self, c):
        return (self.ref(c[0]), c[1])

    # types
    def scalar_type(self, c):
        return _SCALARS[c[0]]

    def tensor_type(self, c):
        return TensorType(_SCALARS[c[0]], tuple(self.integer(d) for d in c[1:]))

    def dialect_type(self, c):
        from .registry import registry

        name = str(c[0])[1:]
        params = tuple(c[1]) if c[1] is not None else ()
        cls = registry().type_class(name)
        if cls is None:
            return OpaqueType(name, params)
        try:
            return cls.from_params(params)
        except (TypeError, ValueError) as e:
            raise error(f"invalid parameters for type !{name}: {e}", self.loc_of(c[0])) from None

    def type_params(self, c):
        return list(c)

    def types(self, c):
        return list(c)

    def function_type(self, c):
        return (c[0] or [], c[1])

    def single_type(self, c):
        return [c[0]]

    def type_tuple(self, c):
        return c[0] or []

    # attributes
    def int_attr(self, c):
        return self.integer(c[0])

    def neg_int_attr(self, c):
        return -self.integer(c[0])

    def integer(self, tok: Token) -> int:
        """The value of an INT token (Python refuses to convert more than 4300 digits: say where)."""
        try:
            return int(tok)
        except ValueError:
            raise error(f"integer literal too long ({len(tok)} digits)", self.loc_of(tok)) from None

    def float_attr(self, c):
        return float(c[0])

    def neg_float_attr(self, c):
        return -float(c[0])

    def inf_attr(self, c):
        return float("inf")

    def neg_inf_attr(self, c):
        return float("-inf")

    def nan_attr(self, c):
        return float("nan")

    def true_attr(self, c):
        return True

    def false_attr(self, c):
        return False

    def unit_attr(self, c):
        return UNIT

    def none_attr(self, c):
        return None

    def string_attr(self, c):
        return self.string(c[0])

    def list_attr(self, c):
        return tuple(c)

    def type_attr(self, c):
        return c[0]

    def function_type_attr(self, c):
        return FunctionType(tuple(c[0][0]), tuple(c[0][1]))

    def symbol_attr(self, c):
        return c[0]

    def bare_symbol(self, c):
        return SymbolRef(str(c[0])[1:])

    def quoted_symbol(self, c):
        return SymbolRef(self.string(c[0]))

    def dict_attr(self, c):
        seen = set()
        for (k, tok), _ in c:
            if k in seen:
                raise error(f"duplicate key {k!r} in dictionary", self.loc_of(tok))
            seen.add(k)
        return DictAttr((k, v) for (k, _), v in c)

    def dict_pair(self, c):
        return (c[0], c[1])

    def dict_unit(self, c):
        return (c[0], UNIT)

    def bare_key(self, c):
        return (str(c[0]), c[0])

    def string_key(self, c):
        return (self.string(c[0]), c[0])

    # index expressions
    def affine_map(self, c):
        kw = c[0]
        c = c[1:]
        loc = self.loc_of(kw)
        dims = [str(d) for d in c if isinstance(d, Token)]
        exprs = [e for e in c if isinstance(e, IndexExpr)]
        for i, d in enumerate(dims):
            if d != f"d{i}":
                raise error(f"affine_map dimensions must be d0, d1, ... in order; found {d} in position {i}", loc)
        for e in exprs:
            for leaf in _leaves(e):
                if isinstance(leaf, ValueLeaf):
                    raise error("SSA values cannot appear in an affine_map; use d0, d1, ...", leaf.ref.loc)
        try:
            return AffineMap(len(dims), tuple(exprs))
        except ValueError as e:
            raise error(str(e), loc) from None

    def iconst(self, c):
        return ix.Const(self.integer(c[0]))

    def ineg(self, c):
        return ix.Const(-self.integer(c[0]))

    def idim(self, c):
        return ix.Dim(int(str(c[0])[1:]))

    def ivalue(self, c):
        return ValueLeaf(self.ref(c[0]))

    def iadd(self, c):
        return ix.Add(c[0], c[1])

    def isub(self, c):
        return ix.Sub(c[0], c[1])

    def imul(self, c):
        return ix.Mul(c[0], c[1])

    def ifloordiv(self, c):
        return ix.FloorDiv(c[0], c[1])

    def iceildiv(self, c):
        return ix.CeilDiv(c[0], c[1])

    def imod(self, c):
        return ix.Mod(c[0], c[1])

    def imin(self, c):
        return ix.Min(c[0], c[1])

    def imax(self, c):
        return ix.Max(c[0], c[1])

    # locations
    def loc(self, c):
        return c[0]

    def loc_unknown(self, c):
        return UNKNOWN

    def loc_file(self, c):
        return FileLineColLoc(self.string(c[0]), self.integer(c[1]), self.integer(c[2]))

    def loc_name(self, c):
        return NameLoc(self.string(c[0]), c[1] if c[1] is not None else UNKNOWN)

    def loc_fused(self, c):
        return fuse(c)


def _leaves(e: IndexExpr):
    kids = e.children()
    if not kids:
        yield e
    for k in kids:
        yield from _leaves(k)


def _unquote(tok, loc: Location = UNKNOWN) -> str:
    try:
        return json.loads(str(tok), strict=False)  # strict=False: a raw tab inside quotes is fine
    except json.JSONDecodeError as e:
        if isinstance(loc, FileLineColLoc):
            loc = FileLineColLoc(loc.file, loc.line, loc.col + e.pos)
        raise error(f"invalid string literal: {e.msg}", loc) from None


# ---- building the parser ---------------------------------------------------------------------------------------
_PARSERS: dict[str, tuple[Lark, FastLALR | None, CoreSyntax]] = {}
_EXTEND = re.compile(r"^%extend\s+custom_op\s*:(.*)$", re.M)


def _parser():
    from .registry import registry

    dialects = registry().dialects()
    parts = [resources.files(__package__).joinpath("core.lark").read_text()]
    mixins, custom_rules = [], {}
    for d in dialects.values():
        if d.grammar:
            text, rules = _name_keywords(d.grammar)
            parts.append(f"// ---- dialect {d.name} ----\n{text}")
            custom_rules.update(rules)
        if d.syntax is not None:
            mixins.append(d.syntax)
    grammar = "\n".join(parts)
    key = hashlib.sha256(grammar.encode()).hexdigest()
    if key not in _PARSERS:
        body = {}
        for rule, strip in custom_rules.items():
            fn = next((getattr(m, rule) for m in mixins if hasattr(m, rule)), None)
            if fn is None:
                raise ValueError(f"no syntax callback for custom op rule '{rule}'")
            body[rule] = _keyword_wrapper(fn, strip)
        syntax = type("Syntax", (*mixins, CoreSyntax), body)()

        def build() -> Lark:
            return Lark(
                grammar, parser="lalr", lexer="contextual", transformer=syntax, maybe_placeholders=True, cache=True
            )

        _PARSERS[key] = (*_fast_parser(key, build, syntax), syntax)
    lark, fast, syntax = _PARSERS[key]
    return lark, syntax, fast


def _fast_parser(key: str, build, syntax) -> tuple:
    """(lark's parser, the FastLALR or None). The FastLALR's tables are kept in the cache folder by grammar: a
    process that finds them loads them and builds lark's parser only if a parse fails (to say why), which halves
    the startup of every `irforge-opt` run."""
    path = _tables_path(key)
    try:
        tables = pickle.loads(path.read_bytes())
        return _Later(build), FastLALR.from_tables(tables, syntax)
    except Exception:  # no tables yet, or unreadable ones: build lark's parser and write them
        pass
    lark = build()
    try:
        fast = FastLALR(lark)
    except Exception:  # lark's internals changed shape, or its lexer does what tables cannot hold: parse with lark
        return lark, None
    _atomic_write(path, pickle.dumps(fast.tables, protocol=pickle.HIGHEST_PROTOCOL))
    return lark, fast


def _tables_path(key: str) -> Path:
    """By grammar, lark's version and the source of the driver that made the tables (which defines their shape)."""
    driver = resources.files(__package__).joinpath("lalr.py").read_bytes()
    tag = hashlib.sha256(f"{key}\0{lark_version}\0".encode() + driver).hexdigest()
    return cache_root() / "parser" / f"{tag}.pickle"


class _Later:
    """lark's parser, built on first use."""

    def __init__(self, build):
        self._build, self._lark = build, None

    def __getattr__(self, name):
        if self._lark is None:
            self._lark = self._build()
        return getattr(self._lark, name)


_RULE_START = re.compile(r"^[?!]*([a-z_][a-z0-9_]*)\s*:\s*(\"[^\"]+\"|[A-Z][A-Z0-9_]*\b)", re.M)


def _name_keywords(grammar: str) -> tuple[str, dict[str, bool]]:
    """Make the op keyword that starts each custom-op rule a named terminal, so its token (and position) is kept.

    A rule starts either with a quoted keyword (`"tensor.reduce"`), which becomes a terminal and is removed before
    the dialect's callback runs, or with a terminal of the dialect's own (`TORCH_OP_NAME`, for op families whose
    name varies), which the callback receives as its first child. Returns the grammar and, per rule, whether the
    keyword is stripped.
    """
    rules = [r.strip() for m in _EXTEND.finditer(grammar) for r in m.group(1).split("|") if r.strip()]
    # Each rule's first symbol, found in one scan of the grammar (a pattern per rule costs a compile each).
    starts: dict = {}
    for m in _RULE_START.finditer(grammar):
        starts.setdefault(m.group(1), m)
    defs, strip, edits = [], {}, []
    for rule in rules:
        m = starts.get(rule)
        if m is None:
            raise ValueError(f"custom op rule '{rule}' must start with its op keyword (a quoted literal or a terminal)")
        if m.group(2).startswith('"'):
            term = "KW_" + re.sub(r"[^A-Za-z0-9]", "_", rule).upper()
            defs.append(f"{term}: {m.group(2)}")
            edits.append((m.start(2), m.end(2), term))
            strip[rule] = True
        else:
            strip[rule] = False
            _OP_STARTS.add(m.group(2))  # a family's name terminal starts an op, like a keyword
    for start, end, term in sorted(edits, reverse=True):
        grammar = grammar[:start] + term + grammar[end:]
    return grammar + "\n" + "\n".join(defs) + "\n", strip


def _keyword_wrapper(fn, strip: bool):
    def rule(self, c):
        ast = fn(self, c[1:] if strip else c)
        ast.loc = self.loc_of(c[0])
        return ast

    rule.__name__ = fn.__name__
    return rule


# ---- errors ----------------------------------------------------------------------------------------------------
_TERMINAL_WORDS = {
    "VALUE_ID": "an SSA value (%name)",
    "BLOCK_ID": "a block label (^name)",
    "SYMBOL_ID": "a symbol (@name)",
    "DIALECT_TYPE": "a dialect type (!name)",
    "SCALAR_TYPE": "a type",
    "DIM_ID": "a dimension (d0, d1, ...)",
    "BARE_KEY": "a name",
    "STRING": "a string",
    "FLOAT": "a number",
    "INT": "an integer",
    "$END": "end of input",
    "<op>": "an operation",
    "RBRACE": "'}'",
}


def _describe(lark: Lark, name: str) -> str:
    if name in _TERMINAL_WORDS:
        return _TERMINAL_WORDS[name]
    try:
        term = lark.get_terminal(name)
    except KeyError:
        return name.lower()
    if term.pattern.type == "str":
        return f"'{term.pattern.value}'"
    return name.lower().replace("_", " ")


def _syntax_error(e: UnexpectedInput, lark: Lark, file: str, text: str) -> IRForgeError:
    line, col = max(e.line, 1), max(e.column, 1)
    expected = set(getattr(e, "expected", None) or ())
    # Where an op may start, every op keyword is acceptable: say "an operation" instead of listing them.
    op_position = "STRING" in expected and any(t.startswith("KW_") for t in expected)
    if op_position:
        expected = {t for t in expected if not t.startswith("KW_") and t not in _OP_STARTS} | {"<op>"}
    if isinstance(e, UnexpectedCharacters):
        ch = text[e.pos_in_stream] if 0 <= e.pos_in_stream < len(text) else "?"
        msg = "unterminated string" if ch == '"' else f"unexpected character {ch!r}"
    elif isinstance(e, UnexpectedEOF) or (isinstance(e, UnexpectedToken) and e.token.type == "$END"):
        body = text.rstrip()  # point just past the last thing written
        line, col = body.count("\n") + 1, len(body) - body.rfind("\n")
        msg = "unexpected end of input"
    elif op_position and _OP_NAME.fullmatch(str(e.token)):
        msg = f"unknown operation '{e.token}'; an op without custom syntax is written in the generic form"
        return error(f'{msg}, "{e.token}"(...) : (...) -> (...)', FileLineColLoc(file, line, col))
    else:
        tok = str(e.token)
        msg = f"unexpected {tok[:40] + '...' if len(tok) > 40 else tok!r}"
    words = sorted({_describe(lark, t) for t in expected if not t.startswith("__")})
    if words and len(words) <= 8:
        msg += "; expected " + (words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1])
    return error(msg, FileLineColLoc(file, line, col))


_OP_STARTS = {"STRING", "RESULT_ID", "__NO_CUSTOM_OP__"}
_OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z0-9_$]+)+")


# ---- resolving names and building ops --------------------------------------------------------------------------
class _Scope:
    __slots__ = ("isolated_by", "parent", "values")

    def __init__(self, parent, isolated_by: str | None = None):
        self.values: dict[str, Value] = {}
        self.parent = parent
        self.isolated_by = isolated_by


class _Builder:
    def __init__(self, allow_unregistered: bool):
        from .registry import registry

        self.registry = registry()
        self.allow_unregistered = allow_unregistered

    def lookup(self, ref: ValueRef, scope: _Scope) -> Value:
        s, crossed = scope, None
        while s is not None:
            v = s.values.get(ref.name)
            if v is not None:
                if crossed:
                    raise error(f"'%{ref.name}' is defined outside '{crossed}', which is isolated from above", ref.loc)
                return v
            crossed = crossed or s.isolated_by
            s = s.parent
        raise error(f"use of undefined value '%{ref.name}'", ref.loc)

    def define(self, ref: ValueRef, v: Value, scope: _Scope) -> None:
        # A name is defined once per isolated-from-above scope (nested regions included), as in MLIR.
        s = scope
        while s is not None:
            if ref.name in s.values:
                raise error(f"redefinition of value '%{ref.name}'", ref.loc)
            if s.isolated_by is not None:
                break
            s = s.parent
        v.name_hint = None if ref.name.isdigit() else ref.name
        scope.values[ref.name] = v

    def build_op(self, ast: OpAST, scope: _Scope) -> Operation:
        cls = self.registry.op_class(ast.name)
        if cls is None:
            if not self.allow_unregistered:
                raise error(f"unknown operation '{ast.name}' (--allow-unregistered-dialect accepts it)", ast.loc)
            cls = Operation
        operands = [self.lookup(r, scope) for r in ast.operands]
        if ast.operand_types is not None:
            if len(ast.operand_types) != len(operands):
                raise error(
                    f"'{ast.name}' lists {len(ast.operand_types)} operand type(s) for {len(operands)} operand(s)",
                    ast.loc,
                )
            for ref, v, t in zip(ast.operands, operands, ast.operand_types):
                if v.type != t:
                    raise error(f"type mismatch for '%{ref.name}': it is {v.type}, but the op says {t}", ref.loc)
        inner = _Scope(scope, ast.name if "isolated" in cls.traits else None)
        regions = [self.build_region(r, inner) for r in ast.regions]
        if "single_block" in cls.traits:
            for r in regions:
                if not r.blocks:
                    r.add_block()
        result_types = ast.result_types
        if result_types is None:
            try:
                result_types = cls.infer_result_types([v.type for v in operands], ast.attrs)
            except IRForgeError:
                raise
            except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:  # operands of the wrong kind
                raise error(f"'{ast.name}': cannot infer result types: {e}", ast.loc) from None
            if result_types is None:
                raise error(f"'{ast.name}' needs its result types spelled out", ast.loc)
        if len(ast.results) != len(result_types):
            raise error(
                f"'{ast.name}' has {len(result_types)} result(s) but {len(ast.results)} name(s) are bound to it",
                ast.loc,
            )
        try:
            # Generic ops and op families (`torch.aten.`) take their full name from the text.
            name = ast.name if cls is Operation or cls.name != ast.name else None
            op = cls(operands, result_types, ast.attrs, regions, ast.loc, name=name)
        except TypeError as e:
            raise error(f"'{ast.name}': {e}", ast.loc) from None
        for ref, r in zip(ast.results, op.results):
            self.define(ref, r, scope)
        return op

    def build_region(self, ast: RegionAST, scope: _Scope) -> Region:
        region = Region()
        for bast in ast.blocks:
            block = region.add_block(Block(label_hint=bast.label))
            bscope = _Scope(scope)
            for ref, t in bast.args:
                self.define(ref, block.add_arg(t), bscope)
            for oast in bast.ops:
                block.append(self.build_op(oast, bscope))
        return region


def read_source(path: str) -> str:
    """A source file's text; a missing file or one that is not UTF-8 is a located error."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise error(f"cannot open input file '{path}': no such file") from None
    return decode_source(data, path)


def parse_module(
    text: str, file: str = "<input>", *, allow_unregistered: bool = False, verify: bool = True, line_offset: int = 0
) -> Operation:
    """Parse IR text into a module (`builtin.module`); raises `IRForgeError` with a location on any mistake."""
    # Parsing allocates many objects and frees none: the cyclic garbage collector would keep re-scanning them
    # (about 40% of the time on large inputs) for nothing. It is paused, and restored as it was.
    paused = gc.isenabled()
    gc.disable()
    try:
        return _parse_module(text, file, allow_unregistered, verify, line_offset)
    finally:
        if paused:
            gc.enable()


def _parse_module(text: str, file: str, allow_unregistered: bool, verify: bool, line_offset: int) -> Operation:
    from .builtin import ModuleOp
    from .verifier import verify as verify_op

    src = "\n" * line_offset + text if line_offset else text
    register_source(file, src)  # a chunk of a split file keeps the file's line numbers
    lark, syntax, fast = _parser()
    syntax.file = file
    try:
        try:
            tree = fast.parse(src) if fast is not None else lark.parse(src)
        except SyntaxFallback:  # lark re-parses to say exactly what is wrong
            tree = lark.parse(src)
        asts = tree.children
    except NestedTooDeeply as e:
        raise error(f"IR {e}", FileLineColLoc(file, e.line, e.column)) from None
    except UnexpectedInput as e:
        raise _syntax_error(e, lark, file, src) from None
    except VisitError as e:
        raise _located(e.orig_exc, file) from None
    except IRForgeError:
        raise
    except RecursionError:
        raise _too_deep(file) from None
    except (ValueError, TypeError) as e:
        raise error(f"invalid IR: {e}", FileLineColLoc(file, 1, 1)) from None
    builder = _Builder(allow_unregistered)
    top = _Scope(None)
    try:
        if len(asts) == 1 and asts[0].name == "builtin.module":
            module = builder.build_op(asts[0], top)
        else:
            module = ModuleOp()
            for ast in asts:
                module.body.append(builder.build_op(ast, top))
        if verify:
            verify_op(module)
    except RecursionError:
        raise _too_deep(file) from None
    return module


def _too_deep(file: str) -> IRForgeError:
    return error("IR nested too deeply (beyond Python's recursion limit)", FileLineColLoc(file, 1, 1))


def _located(exc: Exception, file: str) -> IRForgeError:
    if isinstance(exc, IRForgeError):
        return exc
    return error(f"invalid IR: {exc}", FileLineColLoc(file, 1, 1))
