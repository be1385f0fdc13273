"""Pipeline text: MLIR's syntax, parsed with lark, expanded and checked before anything runs.

    tensor-decompose,loop-fuse{max-recompute=4},kernel(tile-blockify{threads=128 rows=2},tile-stage-inputs)

Elements are passes (with `{key=value ...}` options; list values are comma-separated), named pipelines (files in
`pipelines/`, which may include others), or `anchor(...)` nests that run their passes on every op answering to the
anchor (`kernel`, `func`, or an op name). A pass whose own anchor is not the module is nested implicitly. Every
mistake (unknown pass or option, ill-typed or out-of-domain value, a pass reading a level the IR is not at, an
include cycle) is reported at its place in the text, with a caret.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from .diagnostics import IRForgeError, error, register_source
from .dialect import LEVELS
from .ir import Operation
from .lalr import MAX_NESTING
from .location import FileLineColLoc
from .pass_manager import PassManager, ScheduledPass, format_value

_GRAMMAR = r"""
start: [element ("," element)*] [","]
?element: NAME [options]           -> pass_ref
        | NAME "(" start ")"       -> nest
options: "{" option* "}"
option: KEY ["=" VALUE]
NAME: /[A-Za-z_][A-Za-z0-9_.\-]*/
KEY: /[A-Za-z_][A-Za-z0-9_.\-]*/
VALUE: /"[^"]*"|[^\s{}"]+/
%ignore /[ \t\r\n]+/
"""


@dataclass
class PassRef:
    name: str
    options: list[tuple[str, str | None, Token]]
    tok: Token


@dataclass
class Nest:
    anchor: str
    elements: list = field(default_factory=list)
    tok: Token | None = None


class _ToAST(Transformer):
    def start(self, c):
        return [x for x in c if x is not None]

    def pass_ref(self, c):
        return PassRef(str(c[0]), c[1] or [], c[0])

    def nest(self, c):
        return Nest(str(c[0]), c[1], c[0])

    def options(self, c):
        return list(c)

    def option(self, c):
        value = None if c[1] is None else str(c[1])
        if value is not None and value.startswith('"'):
            value = value[1:-1]
        return (str(c[0]), value, c[0])


_LARK: Lark | None = None


def _strip_comments(text: str) -> str:
    """Blank out `#` and `//` comments, keeping every other character where it was (for columns)."""
    return re.sub(r"(#|//)[^\n]*", lambda m: " " * len(m.group(0)), text)


def parse_pipeline(text: str, source: str = "<pass-pipeline>") -> list:
    global _LARK
    if _LARK is None:
        _LARK = Lark(_GRAMMAR, parser="lalr", maybe_placeholders=True, cache=True)
    register_source(source, text)
    text = _strip_comments(text)
    _check_nesting(text, source)
    try:
        return _ToAST().transform(_LARK.parse(text))
    except UnexpectedInput as e:
        if isinstance(e, UnexpectedCharacters):
            what = f"unexpected character {text[e.pos_in_stream]!r}"
        elif isinstance(e, UnexpectedToken) and e.token.type == "VALUE":  # only valid after `=`: show one character
            what = f"unexpected {text[e.pos_in_stream]!r}"
        elif isinstance(e, UnexpectedToken) and e.token.type != "$END":
            what = f"unexpected '{e.token}'"
        else:
            what = "unexpected end of pipeline"
            lines = text.splitlines() or [""]
            e.line, e.column = len(lines), len(lines[-1]) + 1
        raise error(f"malformed pipeline: {what}", FileLineColLoc(source, max(e.line, 1), max(e.column, 1))) from None


def _check_nesting(text: str, source: str) -> None:
    """Refuse nests deeper than the IR parser takes, at the first parenthesis too deep (quoted values skipped)."""
    depth = 0
    for m in re.finditer(r'"[^"]*"|[({]|[)}]', text):
        if m.group() in "({":
            depth += 1
            if depth > MAX_NESTING:
                line = text.count("\n", 0, m.start()) + 1
                col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
                raise error(f"pipeline nested more than {MAX_NESTING} levels deep", FileLineColLoc(source, line, col))
        elif m.group() in ")}":
            depth -= 1


def _loc(tok: Token, source: str) -> FileLineColLoc:
    return FileLineColLoc(source, tok.line, tok.column)


def known_anchors() -> set[str]:
    from .registry import registry

    names = {"builtin.module"}
    for d in registry().dialects().values():
        for op in d.ops:
            names.add(op.name)
            names.update(op.anchor_aliases)
    return names


def expand(elements, source: str, path: tuple[str, ...] = (), stack: tuple[str, ...] = ()) -> list[ScheduledPass]:
    """Resolve names, options and nesting into a flat schedule of pass instances."""
    from .registry import registry

    reg = registry()
    pipelines = reg.pipelines()
    out: list[ScheduledPass] = []
    for el in elements:
        if isinstance(el, Nest):
            anchor = el.anchor
            if anchor == "builtin.module" and not path:
                out += expand(el.elements, source, path, stack)
                continue
            if anchor not in known_anchors():
                raise error(f"unknown anchor '{anchor}'{_suggest(anchor, known_anchors())}", _loc(el.tok, source))
            out += expand(el.elements, source, (*path, anchor), stack)
            continue
        loc = _loc(el.tok, source)
        cls = reg.pass_class(el.name)
        if cls is not None:
            values = check_options(cls, [(key, raw, _loc(tok, source)) for key, raw, tok in el.options], text=True)
            p = cls(**values)
            sub = path
            if cls.anchor != "builtin.module" and (not path or path[-1] != cls.anchor):
                sub = (*path, cls.anchor)
            out.append(ScheduledPass(p, sub, loc, stack))
        elif el.name in pipelines:
            if el.options:
                raise error(f"named pipeline '{el.name}' takes no options", loc)
            if el.name in stack:
                chain = " -> ".join((*stack, el.name))
                raise error(f"pipeline '{el.name}' includes itself ({chain})", loc)
            named = pipelines[el.name]
            inner = parse_pipeline(named.text, named.source)
            out += expand(inner, named.source, path, (*stack, el.name))
        else:
            hint = _suggest(el.name, [*reg.pass_names(), *pipelines])
            raise error(f"unknown pass or pipeline '{el.name}'{hint}", loc)
    return out


def check_options(cls, items, *, text: bool, context: str = "") -> dict:
    """Option values for pass `cls` from (key, value, location) triples, each checked against the option's type
    and domain: pipeline text (`text=True`; a key without a value sets a bool) or attribute values (a `tune`).
    `context` prefixes every message (e.g. "'tune' attribute: ")."""
    values: dict = {}
    for key, raw, loc in items:
        key = key.replace("_", "-")  # options are spelled with dashes; underscores are accepted
        if key in values:
            raise error(f"{context}option '{key}' of pass '{cls.name}' is given twice", loc)
        opt = cls.options.get(key)
        if opt is None:
            names = ", ".join(cls.options) or "none"
            hint = _suggest(key, cls.options) or f" (its options: {names})"
            raise error(f"{context}pass '{cls.name}' has no option '{key}'{hint}", loc)
        try:
            if raw is None:
                if opt.type is not bool:
                    raise ValueError(f"needs a value ({key}=...)")
                values[key] = True
            else:
                values[key] = opt.check(opt.parse(raw) if text else raw)
        except ValueError as e:
            raise error(f"{context}bad value for option '{key}' of pass '{cls.name}': {e}", loc) from None
    return values


def tune_overrides(op: Operation) -> dict[str, dict]:
    """An op's `tune = {pass-name = {option = value}}` attribute, checked as pipeline options are: each pass must
    be registered and each value fit its option's type and domain. Returns {pass name: {option: value}}."""
    from .attributes import DictAttr
    from .printer import format_attr
    from .registry import registry

    tune = op.attributes.get("tune")
    if tune is None:
        return {}
    if not isinstance(tune, DictAttr):
        raise op.error(
            f"attribute 'tune' must be a dictionary {{pass-name = {{option = value}}}}, not {format_attr(tune)}"
        )
    reg = registry()
    out = {}
    for name, opts in tune.items():
        cls = reg.pass_class(name)
        context = f"'{op.name}' op 'tune' attribute: "
        if cls is None:
            raise error(f"{context}unknown pass '{name}'{_suggest(name, reg.pass_names())}", op.loc)
        if not isinstance(opts, DictAttr):
            raise error(f"{context}pass '{name}' takes a dictionary of options, not {format_attr(opts)}", op.loc)
        out[name] = check_options(cls, [(k, v, op.loc) for k, v in opts.items()], text=False, context=context)
    return out


def _suggest(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def module_level(module: Operation) -> str | None:
    """The least-lowered level any op of the module belongs to (None for level-neutral IR)."""
    from .registry import registry

    reg = registry()
    seen = set()
    for op in module.walk():
        d = reg.dialect_of(op.name)
        if d is not None and d.level is not None:
            seen.add(d.level)
    return min(seen, key=LEVELS.index) if seen else None


def check_levels(schedule: list[ScheduledPass], start: str | None) -> None:
    """Refuse a pass that reads a level the IR will not be at when the pass runs."""
    cur, setter = start, None  # the level, and the pass that left the IR there (None: the input)
    for sp in schedule:
        p = sp.pass_
        if p.input_level != "any" and cur is not None and cur != p.input_level:
            after = f" after '{setter}'" if setter else " in the input"
            raise error(f"pass '{p.name}' reads {p.input_level} IR, but the IR is at the {cur} level{after}", sp.loc)
        out = p.leaves_level()
        if out != "any":
            cur, setter = out, p.name


def schedule_text(schedule: list[ScheduledPass]) -> str:
    """The fully expanded pipeline, every option spelled out; parses back to the same schedule."""

    def render(items, depth):
        parts, i = [], 0
        while i < len(items):
            sp = items[i]
            if len(sp.path) > depth:
                anchor = sp.path[depth]
                j = i
                while j < len(items) and len(items[j].path) > depth and items[j].path[depth] == anchor:
                    j += 1
                parts.append(f"{anchor}({render(items[i:j], depth + 1)})")
                i = j
            else:
                parts.append(sp.pass_.text())
                i += 1
        return ",".join(parts)

    return f"builtin.module({render(schedule, 0)})"


def build_pass_manager(text: str, module: Operation | None = None, source: str = "<pass-pipeline>") -> PassManager:
    schedule = expand(parse_pipeline(text, source), source)
    if module is not None:
        check_levels(schedule, module_level(module))
    return PassManager(schedule, pipeline_text=schedule_text(schedule))


def option_summary(opt) -> str:
    s = f"{opt.name}: {opt.type_name()} = {format_value(opt.default)}"
    if opt.domain is not None:
        s += f", choices {opt.domain}"
    return s


__all__ = ["IRForgeError", "build_pass_manager", "check_levels", "expand", "module_level", "parse_pipeline"]
