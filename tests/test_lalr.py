"""The fast LALR driver gives exactly lark's result: the same trees and callback results (token positions included)
on input that parses, and a fallback (so lark reports the error) on input that does not."""

from __future__ import annotations

import pickle
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ir_strategies import modules
from lark import Lark, Transformer
from lark.exceptions import UnexpectedInput
from test_fuzz import CORPUS, mutated

from irforge.diagnostics import IRForgeError
from irforge.lalr import FastLALR, SyntaxFallback
from irforge.parser import _parser
from irforge.printer import print_module

SAME = settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


# lark names a tree by its rule's name, a Token in a parser built from the grammar and a plain string in one loaded
# from lark's cache; which one the test meets depends on the caches, so the two spellings compare the same.
RULE_NAME = re.compile(r"Token\('RULE', ('[^']*')\)")


def outcome(parse, text):
    """What a parse gives, in a comparable form: the repr of the result, or the kind of failure."""
    try:
        return "ok", RULE_NAME.sub(r"\1", repr(parse(text)))
    except (SyntaxFallback, UnexpectedInput):
        return "syntax error", None
    except IRForgeError as e:  # raised by a callback (e.g. a duplicate key), the same way in both
        return "error", e.render()


def both(lark, fast, text):
    slow, quick = outcome(lark.parse, text), outcome(fast.parse, text)
    assert quick == slow
    return slow


def irforge_parsers():
    lark, syntax, fast = _parser()
    syntax.file = "<same>"
    assert fast is not None
    return lark, fast


def test_corpus_parses_the_same():
    lark, fast = irforge_parsers()
    outcomes = [both(lark, fast, text)[0] for text in CORPUS]
    # The lit files of deliberately invalid IR (--verify-diagnostics tests) fail in a callback, alike in both.
    assert "syntax error" not in outcomes[:1] and outcomes.count("ok") >= len(CORPUS) * 3 // 4, outcomes


def from_tables(fast, transformer):
    """The parser rebuilt from its tables, after a trip through pickle (as a later process loads them)."""
    return FastLALR.from_tables(pickle.loads(pickle.dumps(fast.tables)), transformer)


def test_corpus_parses_the_same_from_tables():
    lark, syntax, fast = _parser()
    syntax.file = "<same>"
    again = from_tables(fast, syntax)
    outcomes = [both(lark, again, text)[0] for text in CORPUS]
    assert outcomes.count("ok") >= len(CORPUS) * 3 // 4, outcomes


@SAME
@given(modules(max_depth=2), st.booleans())
def test_generated_modules_parse_the_same(module, generic):
    lark, fast = irforge_parsers()
    assert both(lark, fast, print_module(module, generic=generic, debuginfo=generic))[0] == "ok"


@SAME
@given(mutated(CORPUS))
def test_mutated_input_fails_the_same(text):
    both(*irforge_parsers(), text)


# A grammar unlike irforge's, using what dialect grammars may use: keep-all-token rules, inlined ?rules, _helpers,
# [optional] placeholders, keywords that also match a name pattern, priorities, comments and multi-line tokens.
TOY = r"""
start: stmt*
stmt: NAME "=" expr ";"            -> assign
    | "print" [expr] ";"            -> show
    | "{" stmt* "}"                 -> block
    | nop
!nop: "nop" ";"
?expr: expr "+" term -> add | term
?term: atom | atom _args
_args: "(" [expr ("," expr)*] ")"
?atom: NUMBER | NAME | STRING | TEXT | "(" expr ")" | KW
KW.2: /if|else/
NAME: /[a-z_][a-z0-9_]*/
NUMBER: /[0-9]+/
STRING: /"[^"\n]*"/
TEXT: /<<<[^>]*>>>/
COMMENT: /#[^\n]*/
%ignore COMMENT
%ignore /[ \t\n]+/
"""


class ToyTransformer(Transformer):
    def assign(self, c):
        return ("assign", str(c[0]), c[0].line, c[0].column, c[1])

    def add(self, c):
        return ("add", c[0], c[1])


@pytest.fixture(scope="module")
def toy():
    lark = Lark(TOY, parser="lalr", lexer="contextual", maybe_placeholders=True, transformer=ToyTransformer())
    return lark, FastLALR(lark)


TOY_WORDS = ["x", "y1", "=", ";", "+", "(", ")", ",", "print", "nop", "{", "}", "12", '"s"', "<<<a\n b>>>", "if"]


@SAME
@given(st.lists(st.sampled_from(TOY_WORDS) | st.sampled_from([" ", "\n", "# c\n", "\t"]), max_size=30))
def test_toy_grammar_random_token_streams(toy, words):
    both(*toy, " ".join(words))


@SAME
@given(st.lists(st.sampled_from(TOY_WORDS) | st.sampled_from([" ", "\n", "# c\n", "\t"]), max_size=30))
def test_toy_grammar_from_tables(toy, words):
    lark, fast = toy
    both(lark, from_tables(fast, ToyTransformer()), " ".join(words))


@pytest.mark.parametrize(
    "text",
    [
        "x = 1;",
        "x = f(1, 2 + y, (3));\nprint;\nprint f();",
        "{ nop; { x = <<<multi\nline>>>; } }\n  y = if + z; # trailing comment",
        "x = a+b+c;",
        "",
        "   \n# only a comment\n",
    ],
)
def test_toy_grammar_examples(toy, text):
    assert both(*toy, text)[0] == "ok"


def test_positions_after_multiline_tokens(toy):
    lark, fast = toy
    text = "x = <<<a\nb\n>>>;\n  # c\n  y = 2;"
    assert [(s[2], s[3]) for s in fast.parse(text).children] == [(1, 1), (5, 3)]
    assert repr(fast.parse(text)) == repr(lark.parse(text))


def test_unreadable_tables_are_made_again(tmp_path, monkeypatch):
    """A tables file that does not load (cut short by a crash, written by another version) costs a rebuild: the
    parser comes from lark, parses, and writes tables that the next process loads."""
    import irforge.parser as P

    monkeypatch.setenv("IRFORGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(P, "_PARSERS", {})
    P._parser()
    (path,) = (tmp_path / "parser").glob("*.pickle")
    path.write_bytes(b"not a pickle")
    monkeypatch.setattr(P, "_PARSERS", {})
    lark, syntax, fast = P._parser()
    assert fast is not None and type(lark).__name__ == "Lark"  # built anew, not loaded
    assert pickle.loads(path.read_bytes()).states == fast.tables.states  # and written again
    monkeypatch.setattr(P, "_PARSERS", {})
    lark, syntax, fast = P._parser()
    assert type(lark).__name__ == "_Later"  # loaded from the tables; lark's parser waits for a parse to fail
    syntax.file = "<same>"
    assert both(lark, fast, CORPUS[0])[0] == "ok"
