"""Parsing textual IR: lark (LALR) turns text into a light syntax tree of `OpAST`s, then one resolver builds the IR.

The grammar is the core grammar (`core.lark`) with every loaded dialect's grammar appended; each dialect also
contributes a syntax mixin whose methods (named after its grammar rules) turn its custom forms into the same
`OpAST` the generic form produces. Custom syntax is therefore sugar: SSA names, scopes, regions, type checks and
verification are handled once, here, for every dialect.
"""

from __future__ import annotations

import gc
import hashlib
import pickle
import re
from importlib import resources
from pathlib import Path

from lark import Lark
from lark import __version__ as lark_version
from lark.exceptions import UnexpectedInput, VisitError

from .cache import atomic_write as _atomic_write
from .cache import cache_root
from .diagnostics import IRForgeError, decode_source, error, register_source
from .ir import Block, Operation, Region, Value
from .lalr import FastLALR, NestedTooDeeply, SyntaxFallback
from .location import FileLineColLoc
from .parser_errors import _OP_STARTS, _syntax_error
from .parser_syntax import CoreSyntax
from .parser_tree import BlockAST, OpAST, RegionAST, ValueLeaf, ValueRef, bind_index_values

__all__ = [
    "BlockAST",
    "OpAST",
    "RegionAST",
    "ValueLeaf",
    "ValueRef",
    "bind_index_values",
    "parse_module",
    "read_source",
]

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
