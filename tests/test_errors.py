"""User mistakes in IR text and pipeline strings: each is one located `file:line:col: error:` message with the
source line and a caret under the column, exit code 1, and never a Python traceback.

The expected positions were worked out by hand from the inputs (1-based line and column).
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import pytest
from irforge.tools.opt import main

_ERROR_LINE = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?P<col>\d+): error: (?P<msg>.*)$")


def run_opt(argv, stdin_text=""):
    out, err = io.StringIO(), io.StringIO()
    rc = main(argv, stdin=io.StringIO(stdin_text), stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def assert_one_located_error(stderr, file, source, line, col, fragment):
    """Exactly one `error:` line, at (line, col) of `file`, followed by that source line and a caret under col."""
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    errors = [i for i, text in enumerate(lines) if ": error: " in text]
    assert len(errors) == 1, stderr
    m = _ERROR_LINE.match(lines[errors[0]])
    assert m, stderr
    assert (m["file"], int(m["line"]), int(m["col"])) == (file, line, col), stderr
    assert fragment in m["msg"], stderr
    assert lines[errors[0] + 1] == source.split("\n")[line - 1]
    assert lines[errors[0] + 2] == " " * (col - 1) + "^"


# (id, IR text, line, col, part of the message)
MALFORMED_IR = [
    ("truncated-function", "func.func @f(%a: f32) -> f32 {\n  %x = test.pure %a : f32\n", 2, 26, "end of input"),
    ("truncated-generic-op", '"foo.bar"(', 1, 11, "unexpected end of input; expected ')'"),
    ("truncated-string", 'func.func @f() {\n  "foo.bar\n', 2, 3, "unterminated string"),
    ("truncated-type", '%0 = "foo.a"() : () -> f32[', 1, 28, "expected ']' or an integer"),
    ("unknown-custom-op", "func.func @f() {\n  foo.bar\n  func.return\n}\n", 2, 3, "unknown operation 'foo.bar'"),
    ("unknown-generic-op", '"foo.bar"() : () -> ()\n', 1, 1, "--allow-unregistered-dialect"),
    (
        "operand-type-mismatch",
        'func.func @f(%a: f32) {\n  "test.effect"(%a) : (i32) -> ()\n  func.return\n}\n',
        2,
        17,
        "type mismatch for '%a': it is f32, but the op says i32",
    ),
    (
        "operand-type-count",
        'func.func @f(%a: f32) {\n  "test.effect"(%a) : () -> ()\n  func.return\n}\n',
        2,
        3,
        "lists 0 operand type(s) for 1 operand(s)",
    ),
    (
        "use-before-definition",
        "func.func @f() {\n  test.effect %x\n  %x = test.constant 1 : f32\n  func.return\n}\n",
        2,
        15,
        "undefined value '%x'",
    ),
    ("undefined-value", "func.func @f() {\n  test.effect %nope\n  func.return\n}\n", 2, 15, "'%nope'"),
    (
        "value-from-sibling-block",
        '"foo.r"() ({\n^bb0:\n  %x = "foo.a"() : () -> f32\n^bb1:\n  "foo.b"(%x) : (f32) -> ()\n}) : () -> ()\n',
        5,
        11,
        "undefined value '%x'",
    ),
    ("unclosed-brace", "func.func @f() {\n  func.return\n", 2, 14, "end of input; expected '}'"),
    ("extra-closing-brace", "func.func @f() {\n  func.return\n}\n}\n", 4, 1, "unexpected '}'"),
    ("unbalanced-parenthesis", '"foo.a"(() : () -> ()\n', 1, 9, "unexpected '('"),
    ("stray-character", "func.func @f() {\n  func.return ~\n}\n", 2, 15, "unexpected character '~'"),
    ("non-ascii-character", "func.func @f() {\n  é\n}\n", 2, 3, "unexpected character 'é'"),
    ("nul-byte", "test.effect\x00\n", 1, 12, "unexpected character '\\x00'"),
    (
        "redefinition",
        "func.func @f() {\n  %x = test.constant 1 : f32\n  %x = test.constant 2 : f32\n  func.return\n}\n",
        3,
        3,
        "redefinition of value '%x'",
    ),
    (
        "shadowing-in-nested-region",
        "func.func @f() {\n  %i = test.constant 1 : f32\n  test.loop %i in 0..4 {\n  }\n  func.return\n}\n",
        3,
        13,
        "redefinition of value '%i'",
    ),
    ("return-type-mismatch", "func.func @f(%a: f32) -> i32 {\n  func.return %a\n}\n", 2, 3, "returns (f32)"),
    ("missing-return", "func.func @f() {\n  test.effect\n}\n", 1, 1, "must end with func.return"),
    ("return-outside-function", "test.loop %i in 0..4 {\n  func.return\n}\n", 2, 3, "must be inside func.func"),
    ("terminator-not-last", "func.func @f() {\n  func.return\n  test.effect\n}\n", 2, 3, "last op of its block"),
    ("invalid-string-escape", '"foo\\q"() : () -> ()\n', 1, 5, "invalid string literal"),
    ("loop-bounds", "test.loop %i in 5..4 {\n}\n", 1, 1, "lower bound above its upper bound"),
    (
        "isolated-from-above",
        "func.func @f(%a: f32) {\n  func.func @g() {\n    test.effect %a\n    func.return\n  }\n  func.return\n}\n",
        3,
        17,
        "isolated from above",
    ),
    (
        "duplicate-symbol",
        "func.func @f() {\n  func.return\n}\nfunc.func @f() {\n  func.return\n}\n",
        4,
        1,
        "redefines symbol '@f'",
    ),
    ("result-count-generic", '%0 = "test.pure"() : () -> (f32, f32)\n', 1, 1, "2 result(s) but 1 name(s)"),
    ("result-count-custom", "%a, %b = test.constant 1 : f32\n", 1, 1, "1 result(s) but 2 name(s)"),
    ("unexpected-result", '%0 = "test.effect"() : () -> f32\n', 1, 1, "expects 0 result(s), got 1"),
    ("missing-attribute", '%0 = "test.constant"() : () -> f32\n', 1, 1, "requires attribute 'value'"),
    ("attribute-of-wrong-kind", '%c = test.constant "one" : f32\n', 1, 1, "must be int or float or bool"),
    ("negative-dimension", '%0 = "foo.a"() : () -> f32[1,-2]\n', 1, 30, "unexpected '-'; expected an integer"),
    ("unknown-type", '%0 = "foo.a"() : () -> f33\n', 1, 24, "unexpected 'f33'"),
    ("affine-map-dimension-order", '"foo.a"() {m = affine_map<(d1) -> (d1)>} : () -> ()\n', 1, 16, "in order"),
    ("affine-map-unknown-dimension", '"foo.a"() {m = affine_map<(d0) -> (d1)>} : () -> ()\n', 1, 16, "uses d1"),
    ("duplicate-dictionary-key", '"foo.a"() {a = 1, a = 2} : () -> ()\n', 1, 19, "duplicate key 'a'"),
    ("attribute-without-value", '"foo.a"() {a = } : () -> ()\n', 1, 16, "unexpected '}'"),
    ("integer-too-long", '"foo.a"() {a = ' + "9" * 5000 + "} : () -> ()\n", 1, 16, "integer literal too long"),
    # past 100 levels, at the first bracket too deep (here the 100th '[' inside the attribute dictionary's '{')
    ("nested-lists", '"foo.a"() {a = ' + "[" * 3000 + "]" * 3000 + "} : () -> ()\n", 1, 115, "nested more than 100"),
    ("nested-dicts", '"foo.a"() {' + "a = {" * 200 + "}" * 201 + " : () -> ()\n", 1, 511, "nested more than 100"),
    ("nested-types", '"foo.a"() : () -> ' + "!foo.t<" * 150 + "f32" + ">" * 150 + "\n", 1, 725, "nested more than 100"),
    (
        "nested-regions",
        "".join(f'"foo.r"() ({{\n^bb{i}:\n' for i in range(120)) + "}) : () -> ()\n" * 120,
        101,  # level i opens '(' at depth 2i+1 on line 2i+1: the 51st level's
        8,
        "nested more than 100",
    ),
    (
        "block-arguments-declared-twice",
        "func.func @f(%a: f32) {\n^bb0(%b: f32):\n  func.return\n}\n",
        1,
        14,
        "block arguments are declared by the op",
    ),
    ("block-label-without-colon", '"foo.r"() ({\n^bb0\n}) : () -> ()\n', 3, 1, "expected '(' or ':'"),
    ("bad-location", '"foo.a"() : () -> () loc(12)\n', 1, 26, "unexpected '12'"),
]


@pytest.mark.parametrize(
    ("text", "line", "col", "fragment"), [c[1:] for c in MALFORMED_IR], ids=[c[0] for c in MALFORMED_IR]
)
def test_malformed_ir(text, line, col, fragment):
    flags = ["--allow-unregistered-dialect"] if "foo.bar" not in text else []
    rc, out, err = run_opt(["-", *flags], text)
    assert rc == 1
    assert out == ""
    assert_one_located_error(err, "<stdin>", text, line, col, fragment)


LOOP = "func.func @f() {\n  test.loop %i in 0..4 {\n    test.yield\n  }\n  func.return\n}\n"

# (id, pipeline, col, part of the message); every pipeline is one line.
MALFORMED_PIPELINES = [
    ("unknown-pass", "cse,csee", 5, "unknown pass or pipeline 'csee'; did you mean 'cse'?"),
    ("unknown-option", "cse{x=1}", 5, "pass 'cse' has no option 'x'"),
    ("ill-typed-int-option", "test-options{threads=many}", 14, "expected an integer, got 'many'"),
    ("ill-typed-bool-option", "test-options{fast=maybe}", 14, "expected true or false"),
    ("ill-typed-float-option", "test-options{scale=1.2.3}", 14, "expected a number"),
    ("ill-typed-list-option", "test-options{tiles=1,x}", 14, "expected an integer, got 'x'"),
    ("option-outside-pow2-domain", "test-options{threads=100}", 14, "100 is outside its domain 32..1024 pow2"),
    ("option-outside-range-domain", "test-options{stages=4}", 14, "4 is outside its domain 1..7 step 2"),
    ("option-outside-choices", "test-options{mode=fast}", 14, "outside its domain {auto, smem, regs}"),
    ("option-without-value", "test-options{threads}", 14, "needs a value"),
    ("option-given-twice", "test-options{threads=64 threads=128}", 25, "given twice"),
    ("unclosed-nest", "func(cse", 9, "unexpected end of pipeline"),
    ("unclosed-options", "cse{", 5, "unexpected end of pipeline"),
    ("stray-closing-brace", "cse}", 4, "unexpected '}'"),
    ("empty-element", "cse,,dce", 5, "unexpected ','"),
    ("unknown-anchor", "nope(cse)", 1, "unknown anchor 'nope'"),
    ("quoted-pass-name", '"cse"', 1, "malformed pipeline"),
    ("wrong-level-order", "test-tensor-to-loop,cse,test-tensor-only", 25, "reads tensor IR, but the IR is at the loop"),
    ("nested-too-deeply", "func(" * 1000 + "cse" + ")" * 1000, 505, "pipeline nested more than 100 levels deep"),
]


@pytest.mark.parametrize(
    ("pipeline", "col", "fragment"), [c[1:] for c in MALFORMED_PIPELINES], ids=[c[0] for c in MALFORMED_PIPELINES]
)
def test_malformed_pipeline(pipeline, col, fragment):
    rc, out, err = run_opt(["-", f"--pass-pipeline={pipeline}"], LOOP)
    assert rc == 1
    assert out == ""
    assert_one_located_error(err, "<pass-pipeline>", pipeline, 1, col, fragment)


def test_pipeline_checked_before_any_pass_runs(tmp_path):
    # test-tag would change the IR, but the bad option after it stops the pipeline before anything runs.
    tree = tmp_path / "tree"
    rc, _out, _err = run_opt(["-", "-p", "test-tag,cse{x=1}", f"--print-ir-tree-dir={tree}"], LOOP)
    assert rc == 1
    assert not tree.exists()


# A `tune` attribute is checked like pipeline options, whether or not the pipeline runs the passes it names.
BAD_TUNES = [
    (
        "typo-in-pass",
        "{test-loop-hnit = {factor = 2}}",
        "unknown pass 'test-loop-hnit'; did you mean 'test-loop-hint'?",
    ),
    ("typo-in-option", "{test-loop-hint = {facter = 2}}", "has no option 'facter'; did you mean 'factor'?"),
    ("ill-typed-value", '{test-loop-hint = {factor = "x"}}', "bad value for option 'factor' of pass 'test-loop-hint'"),
    ("value-outside-domain", "{test-options = {threads = 100}}", "100 is outside its domain 32..1024 pow2"),
    ("not-a-dictionary", "[1, 2]", "attribute 'tune' must be a dictionary"),
    ("options-not-a-dictionary", "{test-loop-hint = 4}", "pass 'test-loop-hint' takes a dictionary of options, not 4"),
]


@pytest.mark.parametrize("pipeline", ["test-loop-hint", ""])
@pytest.mark.parametrize(("tune", "fragment"), [c[1:] for c in BAD_TUNES], ids=[c[0] for c in BAD_TUNES])
def test_bad_tune_attribute_is_located_at_the_op(tune, fragment, pipeline):
    text = f"test.loop %i in 0..4 attributes {{tune = {tune}}} {{\n}}\n"
    rc, _out, err = run_opt(["-", "-p", pipeline], text)
    assert rc == 1
    assert_one_located_error(err, "<stdin>", text, 1, 1, fragment)


def test_good_tune_attribute_overrides_the_option():
    text = "test.loop %i in 0..4 attributes {tune = {test-loop-hint = {factor = 3}}} {\n}\n"
    rc, out, err = run_opt(["-", "-p", "test-loop-hint{factor=2}"], text)
    assert rc == 0, err
    assert "hint = 3" in out


def test_failing_pass_is_located_at_the_op():
    text = "func.func @f() {\n  test.effect {fail}\n  func.return\n}\n"
    rc, _out, err = run_opt(["-", "-p", "test-fail"], text)
    assert rc == 1
    assert_one_located_error(err, "<stdin>", text, 2, 3, "was asked to fail")


def test_ir_broken_by_a_pass_is_caught_by_the_verifier():
    rc, out, err = run_opt(["-", "-p", "test-break-ir"], LOOP)
    assert rc == 1
    assert_one_located_error(err, "<stdin>", LOOP, 2, 3, "(after pass 'test-break-ir')")
    rc, out, err = run_opt(["-", "-p", "test-break-ir", "--no-verify-each"], LOOP)
    assert rc == 0 and "test.loop %i in 5..0" in out


def test_non_utf8_file_is_located(tmp_path):
    path = tmp_path / "bad.ir"
    path.write_bytes(b'func.func @f() {\n  "x\xff"() : () -> ()\n}\n')
    rc, _out, err = run_opt([str(path)])
    assert rc == 1
    assert err.startswith(f"{path}:2:5: error: input is not UTF-8 text (byte 0xff)\n")


def test_missing_file():
    rc, _out, err = run_opt(["/nonexistent/x.ir"])
    assert rc == 1
    assert err == "error: cannot open input file '/nonexistent/x.ir': no such file\n"


# ---- through the installed command, in a real process ----------------------------------------------------------
OPT = os.path.join(os.path.dirname(sys.executable), "irforge-opt")


@pytest.mark.parametrize(
    ("argv", "stdin", "file", "line", "col", "fragment"),
    [
        (["-"], "func.func @f() {\n  func.return\n", "<stdin>", 2, 14, "unexpected end of input"),
        (["-", "-p", "cse,nope"], "", "<pass-pipeline>", 1, 5, "unknown pass or pipeline 'nope'"),
        (["-", "-p", "test-tensor-to-loop,test-tensor-only"], "", "<pass-pipeline>", 1, 21, "reads tensor IR"),
        (["-"], '%0 = "test.pure"() : () -> (f32, f32)\n', "<stdin>", 1, 1, "2 result(s)"),
    ],
    ids=["truncated-ir", "unknown-pass", "wrong-level-order", "arity"],
)
def test_subprocess_error(argv, stdin, file, line, col, fragment):
    proc = subprocess.run([OPT, *argv], input=stdin, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stdout == ""
    source = stdin if file == "<stdin>" else argv[-1]
    assert_one_located_error(proc.stderr, file, source, line, col, fragment)
