"""A faster driver for a lark LALR parser: the same tables, lexer states and callbacks, one tight loop.

lark's own loop spends most of its time per token on bookkeeping (a lexer thread, a line counter object, full
`Token`s for punctuation that the tree builder drops, a method call per shift). This driver lexes with the very
scanners lark built for each parser state (so tokenization, terminal priorities and keyword re-typing are lark's)
and reduces with lark's rule callbacks (so trees and user callbacks are lark's), but does both inline.

It only handles input that parses. At the first token it cannot lex or shift it raises `SyntaxFallback`, and the
caller re-parses with lark itself, which then raises its usual, detailed exception. Errors cost a second parse;
valid input (nearly all of it) is about twice as fast.
"""

from __future__ import annotations

import functools
import operator
import re
import types
from dataclasses import dataclass

from lark import Lark, Token, Tree
from lark.lexer import UnlessCallback
from lark.parse_tree_builder import ChildFilterLALR, ChildFilterLALR_NoPlaceholders, ExpandSingleChild, ParseTreeBuilder

_FILTERS = (ChildFilterLALR, ChildFilterLALR_NoPlaceholders)


class SyntaxFallback(Exception):
    """The input does not parse; let lark report why."""


# How deep brackets may nest in parsed text. Parsing is iterative, but printing, verifying and walking IR recurse
# per level, so deeper input would end in Python's recursion limit far from any location; real IR nests < 20 deep.
MAX_NESTING = 100
_NESTING = {"LPAR": 1, "LSQB": 1, "LBRACE": 1, "LESSTHAN": 1, "RPAR": -1, "RSQB": -1, "RBRACE": -1, "MORETHAN": -1}


class NestedTooDeeply(Exception):
    """An opening bracket (at `line`, `column`) more than `MAX_NESTING` levels deep."""

    def __init__(self, line: int, column: int):
        super().__init__(f"nested more than {MAX_NESTING} levels deep")
        self.line, self.column = line, column


def _new_token(type_: str, value: str, pos: int, line: int, column: int) -> Token:
    t = str.__new__(Token, value)
    t.type, t.value, t.start_pos, t.line, t.column = type_, value, pos, line, column
    t.end_line = t.end_column = t.end_pos = None
    return t


@dataclass
class Tables:
    """What a FastLALR needs of a lark parser, as plain picklable data: loading it is a fraction of the time lark
    takes to rebuild its parser from its own cache, which every process (each `irforge-opt` run) would pay."""

    start_state: int
    end_state: int
    states: dict  # {state: {symbol: next state (a shift) | Rule (a reduction)}}
    rules: list
    kept: frozenset
    skip: str
    flags: int
    scanners: list  # [(pattern, {terminal: {text: keyword terminal}}, terminals spanning lines)]
    scanner_of: dict  # {state: index into scanners}


class FastLALR:
    """Parse with `lark`'s LALR tables and contextual lexer (built with `parser="lalr"`, `lexer="contextual"`)."""

    def __init__(self, lark: Lark, start: str = "start"):
        callbacks = lark.parser.parser.parser.callbacks
        if any(not hasattr(k, "expansion") for k in callbacks):
            raise ValueError("token callbacks are not supported")  # lark's `lexer_callbacks` / visit_tokens
        self._use(_tables_of(lark, start), callbacks)

    @classmethod
    def from_tables(cls, t: Tables, transformer) -> FastLALR:
        """The parser `t` describes, reducing with `transformer`'s callbacks (built as lark builds them for a
        parser with `maybe_placeholders=True`)."""
        self = cls.__new__(cls)
        self._use(t, _LazyCallbacks(t.rules, transformer))
        return self

    def _use(self, t: Tables, callbacks: dict) -> None:
        self.tables = t  # this parser as plain data (what `from_tables` takes)
        self.start_state, self.end_state, self.kept = t.start_state, t.end_state, t.kept
        self.actions = _Actions(t.states, callbacks)
        self.skip = re.compile(t.skip, t.flags)
        self.lexers = _Lexers(t)

    def parse(self, text: str):
        actions, lexers, kept, nesting = self.actions, self.lexers, self.kept, _NESTING
        end_state = self.end_state
        state_stack = [self.start_state]
        value_stack: list = []
        pos, line, line_start, n = 0, 1, 0, len(text)
        depth = 0
        state = self.start_state
        while True:
            # ---- lex one token in the current parser state ------------------------------------------------------
            pattern, retype, newline = lexers[state]
            m = pattern.match(text, pos)
            if m is None:
                if self.skip.match(text, pos).end() < n:
                    raise SyntaxFallback
                type_, tok = "$END", None
            else:
                type_ = m.lastgroup
                start, end = m.span(type_)
                if start != pos:  # skipped whitespace or comments: count their lines
                    skipped = text.count("\n", pos, start)
                    if skipped:
                        line += skipped
                        line_start = text.rindex("\n", pos, start) + 1
                pos = end
                value = text[start:end]
                column = start - line_start + 1
                spans_lines = type_ in newline
                if type_ in retype:
                    tok = retype[type_](_new_token(type_, value, start, line, column))
                    type_ = tok.type
                elif type_ in kept:
                    tok = _new_token(type_, value, start, line, column)
                else:
                    tok = value
                if spans_lines:
                    nl = value.count("\n")
                    if nl:
                        line += nl
                        line_start = start + value.rindex("\n") + 1
                step = nesting.get(type_)
                if step is not None:
                    depth += step
                    if depth > MAX_NESTING:
                        raise NestedTooDeeply(line, column)
            # ---- shift it, reducing first as the table says ---------------------------------------------------------
            row = actions[state]
            while True:
                action = row.get(type_)
                if action is None:
                    raise SyntaxFallback
                if action.__class__ is int:
                    state = action
                    state_stack.append(state)
                    value_stack.append(tok)
                    break
                size, callback, origin = action
                if callback is None:  # passes its one child through
                    del state_stack[-1]
                elif size == 1:
                    del state_stack[-1]
                    value_stack[-1] = callback([value_stack[-1]])
                elif size:
                    children = value_stack[-size:]
                    del state_stack[-size:]
                    del value_stack[-size:]
                    value_stack.append(callback(children))
                else:
                    value_stack.append(callback([]))
                state = actions[state_stack[-1]][origin]
                state_stack.append(state)
                if type_ == "$END" and state == end_state:
                    return value_stack[-1]
                row = actions[state]


def _tables_of(lark: Lark, start: str) -> Tables:
    """`lark`'s parser as Tables: per state, one pattern that skips ignored text (whitespace, comments) and then
    matches one of the state's terminals, in lark's order, and how lark re-types the tokens that spell keywords.
    This assumes what any sane grammar does: no terminal starts with text an ignored terminal matches."""
    table = lark.parser.parser.parser.parse_table
    states = {state: {sym: arg for sym, (_, arg) in row.items()} for state, row in table.states.items()}
    # Terminals that some rule keeps as a child need a real Token; the rest (punctuation) are dropped by the tree
    # builder, so their plain text is pushed instead.
    kept = set()
    for rule in lark.rules:
        for sym in rule.expansion:
            if sym.is_term and (not sym.filter_out or rule.options.keep_all_tokens):
                kept.add(sym.name)
    terminals = {t.name: t for t in lark.terminals}
    ignored = [terminals[name] for name in lark.lexer_conf.ignore]
    # Atomic: the skipped text is never given back to let a token start inside a comment.
    skip = "(?>(?:" + "|".join(f"(?:{t.pattern.to_regexp()})" for t in ignored) + ")*)" if ignored else ""
    scanners, scanner_of, seen = [], {}, {}
    for state, lexer in lark.parser.lexer.lexers.items():
        scanner = lexer.scanner
        if id(scanner) not in seen:
            alternatives = "|".join(
                f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in scanner.terminals if t.name not in lexer.ignore_types
            )
            words = {}
            for name, cb in lexer.callback.items():
                if not isinstance(cb, UnlessCallback) or any(t.pattern.flags for t in cb.scanner.terminals):
                    raise ValueError(f"terminal {name} is re-typed by a callback these tables cannot hold")
                words[name] = {t.pattern.value: t.name for t in cb.scanner.terminals}
            newline = frozenset(t for t in lexer.newline_types if t not in lexer.ignore_types)
            seen[id(scanner)] = len(scanners)
            scanners.append((f"{skip}(?:{alternatives})", words, newline))
        scanner_of[state] = seen[id(scanner)]
    return Tables(
        table.start_states[start],
        table.end_states[start],
        states,
        list(lark.rules),
        frozenset(kept),
        skip,
        lark.lexer_conf.g_regex_flags,
        scanners,
        scanner_of,
    )


class _Actions(dict):
    """{state: {symbol: next state | (number of symbols, callback, the nonterminal it makes)}}: each state's row,
    and each rule's callback, made when a parse first reaches it (a file visits a fraction of the states)."""

    def __init__(self, states: dict, callbacks: dict):
        super().__init__()
        self.states, self.callbacks = states, callbacks
        builders = getattr(callbacks, "builders", None)  # a _LazyCallbacks knows them without making the callbacks
        if builders is None:
            builders = {rule: _CallbackCompiler.builder(f) for rule, f in callbacks.items()}
        self.compiler = _CallbackCompiler(builders)
        self.reductions: dict = {}

    def __missing__(self, state):
        row = {}
        for sym, arg in self.states[state].items():
            if not isinstance(arg, int):
                if arg not in self.reductions:
                    made = self.compiler.compile(arg, self.callbacks[arg])
                    self.reductions[arg] = (len(arg.expansion), made, arg.origin.name)
                arg = self.reductions[arg]
            row[sym] = arg
        self[state] = row
        return row


class _LazyCallbacks(dict):
    """{rule: lark's callback}, as `ParseTreeBuilder.create_callback` makes them for a parser with
    `maybe_placeholders=True`, each made the first time a parse reduces by its rule: a grammar has some 1400 rules,
    and wrapping them all would cost every process more than the parse of a typical file."""

    def __init__(self, rules: list, transformer):
        super().__init__()
        self.transformer = transformer
        # The callbacks lark's wrappers (child filters, single-child expansion) would wrap: cheap to make for all.
        bare = ParseTreeBuilder([], Tree)
        bare.rule_builders = [(rule, []) for rule in rules]
        self.builders = bare.create_callback(transformer)

    def __missing__(self, rule):
        made = ParseTreeBuilder([rule], Tree, False, False, True).create_callback(self.transformer)[rule]
        self[rule] = made
        return made


class _Keywords:
    """lark's re-typing of a token that spells a keyword (`UnlessCallback` over literal strings)."""

    def __init__(self, words: dict):
        self.words = words

    def __call__(self, t):
        t.type = self.words.get(t.value, t.type)
        return t


class _Lexers(dict):
    """{parser state: (pattern, re-typing callbacks, terminals spanning lines)}, each pattern compiled the first time
    a parse reaches a state that uses it: a parser has some 230 states and a file visits a fraction, and compiling
    them all would cost every process a second at startup."""

    def __init__(self, t: Tables):
        super().__init__()
        self.t, self.built = t, {}

    def __missing__(self, state):
        i = self.t.scanner_of[state]
        if i not in self.built:
            pattern, words, newline = self.t.scanners[i]
            retype = {name: _Keywords(w) for name, w in words.items()}
            self.built[i] = (re.compile(pattern, self.t.flags), retype, newline)
        self[state] = self.built[i]
        return self[state]


def _is_default_tree(f) -> bool:
    """lark's builder for rules without a callback method: `Tree(rule name, children)`."""
    return isinstance(f, functools.partial) and getattr(f.func, "__name__", "") == "default_callback"


class _CallbackCompiler:
    """Turn lark's chain of callback wrappers for a rule into one generated function with the same result.

    The wrappers are: child filters (drop punctuation, splice in the children of `_helper` rules, insert None for
    absent `[optional]` parts), "expand single child" for `?rules`, and the builder (a callback method, or a plain
    Tree). Helper rules (`_name`, e.g. lark's expansions of `x ("," x)*`) exist only to be spliced into their
    parent, so their value is made a plain list rather than a Tree whose children are then copied out.
    """

    def __init__(self, builders: dict):
        """`builders`: {rule: what its callback builds the value with, lark's wrappers taken off (`builder`)}."""
        by_origin: dict[str, list] = {}
        for rule, f in builders.items():
            by_origin.setdefault(rule.origin.name, []).append(f)
        # Only when every callback is made of known parts can a helper's value change shape (no unknown wrapper
        # would then look for its `.children`).
        known = all(
            _is_default_tree(f) or isinstance(f, (types.MethodType, types.FunctionType)) for f in builders.values()
        )
        self.as_list = {
            name
            for name, fs in by_origin.items()
            if known and name.startswith("_") and all(_is_default_tree(f) for f in fs)
        }

    @staticmethod
    def builder(f):
        while isinstance(f, (*_FILTERS, ExpandSingleChild)):
            f = f.node_builder
        return f

    def compile(self, rule, f):
        """A function of the raw children, or None when the rule passes its single child through."""
        expansion = rule.expansion
        env = {}
        if isinstance(f, _FILTERS):
            items = f.to_include if isinstance(f, ChildFilterLALR) else [(i, e, 0) for i, e in f.to_include]
            tail = getattr(f, "append_none", 0) if isinstance(f, ChildFilterLALR) else 0
            f = f.node_builder
        else:
            items, tail = [(i, False, 0) for i in range(len(expansion))], 0
        single = isinstance(f, ExpandSingleChild)
        if single:
            f = f.node_builder
        if single and not tail and len(items) == 1 and not items[0][1] and not items[0][2]:
            i = items[0][0]
            return None if (i, len(expansion)) == (0, 1) else operator.itemgetter(i)
        # The filtered children as statements building `r`: runs of plain children, and spliced helpers.
        lines, plain = [], []
        for i, expand, nones in items:
            plain += ["None"] * nones
            if not expand:
                plain.append(f"c[{i}]")
                continue
            part = f"c[{i}]" if expansion[i].name in self.as_list else f"c[{i}].children"
            if not lines and not plain:  # lark's left-recursion trick: take over the helper's list, do not copy
                lines.append(f"r = {part}")
            elif not lines:
                lines.append(f"r = [{', '.join(plain)}] + {part}")
            else:
                lines += [f"r += [{', '.join(plain)}]"] if plain else []
                lines.append(f"r += {part}")
            plain = []
        plain += ["None"] * tail
        if not lines:
            lines.append(f"r = [{', '.join(plain)}]")
        elif plain:
            lines.append(f"r += [{', '.join(plain)}]")
        if _is_default_tree(f) and rule.origin.name in self.as_list:
            result = "r"
        else:
            env["build"] = f
            result = "build(r)"
        if single:
            result = f"r[0] if len(r) == 1 else {result}"
        source = "def reduce(c):\n    " + "\n    ".join([*lines, f"return {result}"])
        exec(source, env)
        return env["reduce"]
