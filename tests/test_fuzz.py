"""Fuzzing the parsers: random bytes and mutated valid IR or pipelines never raise anything but `IRForgeError`,
and every error it raises renders as a message located in the input."""

from __future__ import annotations

import os
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ir_strategies import modules

from irforge.diagnostics import IRForgeError
from irforge.parser import parse_module
from irforge.pipeline import build_pass_manager
from irforge.printer import print_module

FUZZ = int(os.environ.get("IRFORGE_FUZZ_EXAMPLES", "0"))
FUZZING = settings(
    max_examples=FUZZ or 300,
    deadline=None,
    derandomize=not FUZZ,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
_LOCATED = re.compile(r"^\S[^\n]*:\d+:\d+: error: ", re.M)

# Valid inputs to mutate: every lit test's IR, and a hand-written module touching most of the grammar.
SEED = """\
func.func @f(%a: f32, %t: f32[2,0]) -> (f32, i64) attributes {tune = {test-loop-hint = {factor = 2}}} {
  %c = test.constant -1.5e-3 : f32
  %p = test.pure %a, %c {tag = "x\\n✓", list = [1, -2, inf, nan, unit, @sym, @"q s"]} : f32
  test.loop %i in 0..16 attributes {m = affine_map<(d0, d1) -> (d0 * 4 + d1 floordiv 2, min(d0, -3) mod 5)>} {
    test.effect %i, %p
    test.yield
  }
  %r, %s = "foo.op"(%a) ({
  ^bb0(%x: !foo.t<1, f32, "s">):
    "foo.inner"(%x) : (!foo.t<1, f32, "s">) -> ()
  ^bb1:
  }) {ft = (f32) -> (i64, bool[]), d = {"odd key" = true, k}} : (f32) -> (f32, i64) loc("f.ir":3:4)
  %0, %1 = func.call @g(%a) : (f32) -> (f32, i64) loc(fused["a", "n"("x":1:2)])
  func.return %0, %1
}
"""
CORPUS = [SEED] + [
    p.read_text(encoding="utf-8")
    for p in sorted((Path(__file__).parent / "lit").rglob("*.ir"))
    if "Output" not in p.parts
]
TOKENS = [
    "{", "}", "(", ")", "[", "]", "<", ">", ",", ":", "=", "->", "%", "%x", "%0", "^bb0:", "@", '"', "\\", "-", "9",
    "9" * 5000, "1e999", "nan", "loc(", "affine_map<", "d0", "floordiv", "!foo", "f32[", "module", "func.func",
    "test.loop", "//", "\n", "\x00", "é", "\ud800", "\u2028", "[" * 2000,
]  # fmt: skip


@st.composite
def mutated(draw, corpus):
    text = draw(st.sampled_from(corpus))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 40)))
        edit = draw(st.sampled_from(["delete", "insert", "duplicate", "replace", "truncate"]))
        if edit == "delete":
            text = text[:i] + text[j:]
        elif edit == "insert":
            text = text[:i] + draw(st.sampled_from(TOKENS) | st.text(max_size=3)) + text[i:]
        elif edit == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        elif edit == "replace":
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[j:]
        else:
            text = text[:i]
    return text


def only_located_errors(parse, text, source):
    try:
        parse(text)
    except IRForgeError as e:
        rendered = e.render()  # rendering must not fail either (odd characters, lines past the end, ...)
        assert _LOCATED.match(rendered), rendered
        assert rendered.startswith(source + ":"), rendered
    # anything else propagates and fails the test


def _parse_ir(text):
    module = parse_module(text, "<fuzz>", allow_unregistered=True)
    print_module(module)  # whatever parses must print


def _random_text(data: bytes) -> str:
    return data.decode("utf-8", errors="surrogateescape")


@FUZZING
@given(st.binary(max_size=200).map(_random_text) | st.text(max_size=200))
def test_random_input_to_ir_parser(text):
    only_located_errors(_parse_ir, text, "<fuzz>")


@FUZZING
@given(mutated(CORPUS))
def test_mutated_ir(text):
    only_located_errors(_parse_ir, text, "<fuzz>")


@settings(FUZZING, max_examples=FUZZ or 100)
@given(st.data())
def test_mutated_generated_ir(data):
    text = print_module(data.draw(modules(max_depth=2)), generic=data.draw(st.booleans()))
    only_located_errors(_parse_ir, data.draw(mutated([text])), "<fuzz>")


PIPELINES = [
    "cse,dce",
    "builtin.module(func(cse),test-loop-hint{factor=4})",
    'test-options{threads=64 fast tiles=1,2,3 label="a b" mode=smem scale=2.5e-1}',
    "loop(test-loop-hint),test-tag{tag=x}",
]


@FUZZING
@given(mutated(PIPELINES) | st.text(max_size=40))
def test_mutated_pipelines(text):
    only_located_errors(lambda t: build_pass_manager(t, source="<fuzz-pipeline>"), text, "<fuzz-pipeline>")
