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
    ('  %c = kernel.const 0.0 : !kernel.frag<"a", f32, [16, 8]>\n', "shape is a multiple of [16, 16]", 2),
    ('  %c = kernel.const 0.0 : !kernel.frag<"b", bf16, [8, 8]>\n', "shape is a multiple of [16, 8], got [8, 8]", 2),
    ('  %c = kernel.const 0.0 : !kernel.frag<"acc", f32, [24, 8]>\n', "(or 8 rows: the atoms' top half)", 2),
    (
        "  %s = kernel.smem bf16[8,1,16]\n  %f = kernel.frag_load %s[0, 0, 0] {rows_dim = -4} :"
        ' !kernel.frag<"a", bf16, [8, 16]>\n',
        "rows_dim must name a dimension of !kernel.smem<bf16, [8, 1, 16]> before its last (-3 .. -2)",
        3,
    ),
    (
        "  %s = kernel.smem bf16[8,16]\n"
        '  %f = kernel.frag_load %s[0, 0] {rows = 3} : !kernel.frag<"a", bf16, [8, 16]>\n',
        'rows = 3: an "a" fragment\'s valid rows, at least half its 8 and fewer',
        3,
    ),
    (
        '  %f = kernel.frag_load %x[0] stride 16 {rows_dim = -3} : !kernel.frag<"a", f32, [8, 16]>\n',
        "takes its rows' distance as `stride`, not rows_dim",
        2,
    ),
    ("  %s = kernel.smem f32[4] swizzle(1, 2)\n", "expected", 2),
    ("  %t = kernel.thread_id x\n  %v = kernel.shfl_xor %t, 3 {width = 3} : index\n", "width must be a power", 3),
    ("  %t = kernel.thread_id x\n  %v = kernel.load %x[%t] : f32[3]\n", "moves 12 bytes; vector accesses", 3),
    ("  %t = kernel.thread_id x\n  %v = kernel.load %x[%t] : f32[0]\n", "a register tile with no elements", 3),
    ("  %t = kernel.thread_id x\n  %v = kernel.load %t[%t] : f32\n", "accesses a !kernel.ptr or !kernel.smem", 3),
    ("  %t = kernel.thread_id x\n  %v = kernel.load %x[%t mod 0] : f32\n", "divisors must be positive", 3),
    ("  kernel.setmaxnreg inc 236\n", "count must be a multiple of 8 from 24 to 256, not 236", 2),
    ("  kernel.setmaxnreg dec 16\n", "count must be a multiple of 8 from 24 to 256, not 16", 2),
    ("  kernel.setmaxnreg up 64\n", "expected", 2),
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


def test_builder_builds_what_the_docs_show():
    import numpy as np
    from irforge.dialects.kernel import ops as K
    from irforge.dialects.kernel.builder import KernelBuilder, Val
    from irforge.dialects.kernel.simulator import run
    from irforge.dialects.kernel.types import PtrType

    from irforge.attributes import SymbolRef
    from irforge.builtin import FuncOp, ModuleOp, ReturnOp
    from irforge.types import ScalarType, boolean, index, tensor

    f32 = ScalarType("f32")
    kb = KernelBuilder.kernel("k_scale", [PtrType(f32)] * 2, grid=2, block=32, names=["x", "y"])
    x, y = kb.args
    t, b = kb.thread_id("x", "t"), kb.block_id("x", "b")
    i = kb.index(Val(b) * 128 + Val(t) * 4, "i")
    v = kb.load(x, [Val(i)], tensor(f32, 4), "v")
    with kb.for_(0, 2, carries=[v]) as loop:
        loop.yield_(kb.scalar("mul", loop.carries[0], loop.carries[0]))
    first = kb.scalar("eq", t, kb.const(0, index), hint="first")
    assert first.type == boolean
    with kb.if_(first, [f32]) as br:
        with br.then():
            br.yield_(kb.const(1.0, f32))
        with br.otherwise():
            br.yield_(kb.const(2.0, f32))
    kb.store(kb.scalar("mul", loop.results[0], br.results[0]), y, [Val(i)])
    m = ModuleOp()
    m.body.append(kb.op)
    host = FuncOp.build("forward", [tensor(f32, 256)], [tensor(f32, 256)], ["x"])
    hb = KernelBuilder(host.body)
    out = hb._add(K.AllocOp((), [tensor(f32, 256)]), "out")
    hb._add(K.LaunchOp([host.body.args[0], out], (), {"callee": SymbolRef("k_scale")}))
    host.body.append(ReturnOp([out], ()))
    m.body.append(host)
    verify(m)
    text = print_module(m)
    assert "%v = kernel.load %x[%i] : f32[4]" in text and "kernel.for %i_1 in 0 .. 2 carry(%v_1 <- %v : f32[4])" in text
    xs = np.random.default_rng(0).standard_normal(256).astype(np.float32)
    (got,) = run(parse_module(text), [xs])
    scale = np.where(np.arange(256) % 128 < 4, 1.0, 2.0)  # thread 0 of each block has elements 0..3
    np.testing.assert_allclose(got, xs.astype(np.float64) ** 4 * scale, rtol=1e-5)
