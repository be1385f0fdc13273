"""The kernel dialect: syntax round trips (hand-written programs and hypothesis-generated ones), verifier rules."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from irforge.dialects.kernel import examples
from irforge.tools.opt import main as opt_main
from kernel_programs import kernel_modules

from irforge.diagnostics import IRForgeError
from irforge.hashing import structurally_equal
from irforge.parser import parse_module
from irforge.printer import print_module
from irforge.scalar_ops import SCALAR_OPS
from irforge.verifier import verify

EXAMPLES = examples.tiny_examples()


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.name)
def test_examples_round_trip(ex):
    m = parse_module(ex.ir, f"{ex.name}.ir")
    assert print_module(m) == ex.ir
    generic = print_module(m, generic=True)
    assert structurally_equal(parse_module(generic), m)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(kernel_modules())
def test_random_kernels_round_trip(m):
    verify(m)
    text = print_module(m)
    again = parse_module(text)
    assert print_module(again) == text
    assert structurally_equal(again, m)
    assert structurally_equal(parse_module(print_module(m, generic=True)), m)


def test_every_scalar_op_is_a_kernel_op():
    ops = "\n".join(
        f"  %r{i} = kernel.{n} {', '.join(['%c'] * o.arity)} : bool" if o.kind == "logic" else ""
        for i, (n, o) in enumerate(SCALAR_OPS.items())
    )
    text = f"kernel.func @k() grid(1) block(32) {{\n  %c = kernel.const true : bool\n{ops}\n}}\n"
    m = parse_module(text.replace("\n\n", "\n"))
    names = {op.name for op in m.walk()}
    assert {f"kernel.{n}" for n, o in SCALAR_OPS.items() if o.kind == "logic"} <= names
    # floor and floordiv share a prefix: the longest name must win.
    m = parse_module(
        "kernel.func @k() grid(1) block(32) {\n  %a = kernel.const 7.0 : f32\n"
        "  %f = kernel.floordiv %a, %a : f32\n  %g = kernel.floor %a : f32\n}\n"
    )
    assert [op.name for op in m.walk()][-2:] == ["kernel.floordiv", "kernel.floor"]


HEADER = "kernel.func @k(%x: !kernel.ptr<f32>) grid(2) block(64) {\n"

BAD = [
    ("  %t = kernel.thread_id x\n  %v = kernel.load %x[%t] : bf16\n", "does not match the element type", 3),
    ("  %t = kernel.thread_id x\n  %v = kernel.load %x[%t, %t] : f32\n", "needs 1 index expression(s)", 3),
    ("  %c = kernel.const 1.0 : f32\n  %v = kernel.add %c, %c : f16\n", "result type must be f32", 3),
    ("  %c = kernel.const 1.5 : i32\n", "does not fit type i32", 2),
    ("  %c = kernel.const 1.0 : f32\n  %v = kernel.exp %c, %c : f32\n", "takes 1 operand", 3),
    ("  %c = kernel.const 1 : i32\n  %v = kernel.exp %c : i32\n", "needs a floating-point operand", 3),
    (
        "  %s = kernel.smem f32[4]\n  %t = kernel.thread_id x\n  %v = kernel.load %s[%t] : f32[8]\n",
        "more than a row",
        4,
    ),
    ("  %c = kernel.const 1.0 : f32\n  kernel.if %c {\n  }\n", "condition must be bool", 3),
    (
        "  %c = kernel.const 1.0 : f32\n  %r = kernel.for %i in 0 .. 4 carry(%a <- %c : f32) {\n  }\n",
        "body must yield (f32)",
        3,
    ),
    ("  %t = kernel.thread_id x\n  kernel.for %i in 0 .. 4 step 0 {\n  }\n", "step must be positive", 3),
    ("  %t = kernel.thread_id w\n", "expected", 2),
    ("  %b = kernel.smem mbarrier[1]\n  kernel.mbarrier_init %b[0], 0\n", "count must be positive", 3),
    (
        '  %c = kernel.const 0.0 : !kernel.frag<"acc", f32, [16, 8]>\n  %d = kernel.mma %c, %c, %c :'
        ' !kernel.frag<"acc", f32, [16, 8]>\n',
        'takes an "a", a "b" and an "acc" fragment',
        3,
    ),
    ('  %c = kernel.const 0.0 : !kernel.frag<"a", f32, [16, 8]>\n', "no fragment layout", 2),
    ("  %s = kernel.smem f32[4] swizzle(1, 2)\n", "expected", 2),
    ("  %t = kernel.thread_id x\n  %v = kernel.shfl_xor %t, 3 {width = 3} : index\n", "width must be a power", 3),
    ("  %t = kernel.thread_id x\n  %v = kernel.load %x[%t] : f32[3]\n", "moves 12 bytes; vector accesses", 3),
]


def test_tensormap_rules():
    with pytest.raises(IRForgeError, match="multiples of 16 bytes"):
        parse_module("kernel.func @k(%m: !kernel.tensormap<bf16, [64, 64], [8, 4]>) grid(1) block(1) {\n}\n")


@pytest.mark.parametrize("body,message,line", BAD, ids=[b[1][:30] for b in BAD])
def test_verifier_and_syntax_errors_are_located(body, message, line):
    with pytest.raises(IRForgeError) as e:
        parse_module(HEADER + body + "}\n", "bad.ir")
    rendered = e.value.render()
    assert message in rendered
    assert rendered.startswith(f"bad.ir:{line}:")


def test_host_errors():
    base = (
        "kernel.func @k(%x: !kernel.ptr<f32>, %y: !kernel.ptr<f32>) grid(1) block(32) {\n"
        "  %t = kernel.thread_id x\n  %v = kernel.load %x[%t] : f32\n  kernel.store %v, %y[%t]\n}\n"
    )
    cases = [
        ("  kernel.launch @k(%a)\n", "passes 1 argument(s) to a kernel with 2"),
        ("  kernel.launch @nope(%a, %a)\n", "not a kernel.func of the module"),
        ("  kernel.launch @k(%a, %a)\n", "passes one buffer as arguments #0 and #1"),
        ("  %b = kernel.alloc : i32[32]\n  kernel.launch @k(%a, %b)\n", "cannot bind parameter type"),
        ("  %b = kernel.view %a : f32[3,10]\n", "cannot view"),
    ]
    for host, message in cases:
        text = base + f"func.func @forward(%a: f32[32]) -> f32[32] {{\n{host}  func.return %a\n}}\n"
        with pytest.raises(IRForgeError) as e:
            parse_module(text)
        assert message in str(e.value)
    with pytest.raises(IRForgeError, match=r"must be inside a kernel\.func"):
        parse_module("func.func @f() {\n  kernel.barrier\n  func.return\n}\n")
    with pytest.raises(IRForgeError, match=r"cannot be inside a kernel\.func"):
        parse_module("kernel.func @k() grid(1) block(1) {\n  %b = kernel.alloc : f32[2]\n}\n")


def test_opt_tool_reports_a_bad_kernel_without_traceback(tmp_path):
    bad = tmp_path / "bad.ir"
    bad.write_text(HEADER + "  %t = kernel.thread_id x\n  %v = kernel.load %x[%t] : bf16\n}\n")
    err, out = io.StringIO(), io.StringIO()
    assert opt_main([str(bad)], stdout=out, stderr=err) == 1
    text = err.getvalue()
    assert f"{bad}:3:" in text and "does not match the element type" in text and "Traceback" not in text
    assert text.splitlines()[1] == "  %v = kernel.load %x[%t] : bf16"
