"""Lifting and the loop passes: every pass keeps the interpreter's answer (random programs, hypothesis), the
pipeline matches the tensor level, and fusion refuses what it must."""

from __future__ import annotations

import loopgen
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from irforge.dialects.loop import KernelOp, ReduceOp

from irforge.builtin import FuncOp
from irforge.pass_manager import run_pipeline
from irforge.pipeline import module_level
from irforge.printer import print_module
from irforge.registry import registry
from irforge.testing import check_pipeline
from irforge.testing.strategies import loop_programs, tensor_programs
from irforge.types import f32, tensor

FUSION = ["loop-fuse-elementwise", "loop-fuse-broadcast", "loop-fuse-reductions"]
LOOP_PASSES = [
    "loop-fuse-horizontal",
    "loop-fuse-launches",
    "loop-fuse-siblings",
    "loop-online-softmax",
    "loop-licm",
    "loop-cse",
    "loop-dce",
    "loop-dedupe-loads",
]
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def runs_somewhere(module) -> bool:
    """The generator may return an input untouched; such a program has no level to interpret."""
    func = next(op for op in module.body.ops if isinstance(op, FuncOp))
    ret = func.body.ops[-1]
    return module_level(module) is not None and all(getattr(v, "op", None) is not None for v in ret.operands)


def check_pass(module, pipeline):
    """`pipeline` run on a copy of `module`, which the interpreters must agree on before and after (two draws)."""
    return check_pipeline(module, pipeline, seeds=(0, 1))


def kernels(module) -> list[KernelOp]:
    return [op for op in module.walk() if isinstance(op, KernelOp)]


programs = st.one_of(tensor_programs(), loopgen.softmax_programs(), loopgen.sibling_programs())


# ---- numerics: lifting, the pipeline, each pass ----------------------------------------------------------------
@SETTINGS
@given(programs)
def test_lifting_and_the_pipeline_match_the_tensor_level(module):
    assume(runs_somewhere(module))
    check_pipeline(module, "lift-to-loop", seeds=(0, 1))
    after = check_pipeline(module, "tensor-to-loop", seeds=(0, 1))
    assert module_level(after) == "loop"


@pytest.mark.parametrize("name", FUSION)
@SETTINGS
@given(programs, st.sampled_from(["0.0", "1.0", "8.0"]))
def test_fusion_pass_keeps_the_answer(name, module, recompute):
    assume(runs_somewhere(module))
    run_pipeline(module, "lift-to-loop")
    opts = "" if name == "loop-fuse-elementwise" else f"{{max-recompute={recompute}}}"
    check_pass(module, name + opts)


@pytest.mark.parametrize("name", LOOP_PASSES)
@SETTINGS
@given(st.one_of(programs, loop_programs()), st.booleans())
def test_kernel_pass_keeps_the_answer(name, module, fused):
    """On lifted programs (fused or not) and on random loop nests."""
    assume(runs_somewhere(module))
    if module_level(module) == "tensor":
        run_pipeline(module, "lift-to-loop" + (",loop-fuse-elementwise,loop-fuse-reductions" if fused else ""))
    check_pass(module, name)


@pytest.mark.parametrize("name", [*FUSION, *LOOP_PASSES, "tensor-to-loop"])
@SETTINGS
@given(st.one_of(programs, loop_programs()))
def test_passes_are_idempotent(name, module):
    """Run twice, a pass (and the whole pipeline) finds nothing left to do: it recognizes its work from the IR."""
    assume(runs_somewhere(module))
    if module_level(module) == "tensor":
        run_pipeline(module, "lift-to-loop")
    pipeline = _tensor_to_loop_on_loop_ir() if name == "tensor-to-loop" else name
    run_pipeline(module, pipeline)
    once = print_module(module)
    run_pipeline(module, pipeline)
    assert print_module(module) == once


def _tensor_to_loop_on_loop_ir() -> str:
    """The tensor-to-loop pipeline past its first pass (lift-to-loop reads tensor IR): what it runs on loop IR, so
    that the test follows the pipeline as it is (a copy of its list missed the second loop-fuse-reductions, which
    fuses a reduction into the consumers horizontal fusion has merged)."""
    text = registry().pipelines()["tensor-to-loop"].text
    passes = [p.strip() for p in "".join(ln.split("#")[0] for ln in text.splitlines()).split(",") if p.strip()]
    assert passes[0] == "lift-to-loop"
    return ",".join(passes[1:])


# ---- what fusion produces --------------------------------------------------------------------------------------
def build(arg_types, names, body):
    return loopgen.tensor_module(arg_types, names, body)


def test_subscript_simplification_is_a_fixpoint():
    """Found by the idempotence property: simplifying `((a0 + r*2 + 2) floordiv 2) mod 2` renumbered its values,
    so a second run reordered the terms again (`%r + 1 + ...` then `%r + ... + 1`)."""
    from irforge.parser import parse_module

    module = parse_module("""func.func @forward(%x0: f32[1,2]) -> f32[3] {
  %t1 = loop.buffer f32[3]
  loop.kernel @k1 {
    loop.for %a0 in 0..3 {
      %s = loop.reduce %r in 0..2 add(0.0) -> f32 {
        %v = loop.load %x0[0, (%a0 + %r * 2 + 2) floordiv 2 mod 2]
        loop.yield %v
      }
      loop.store %t1[%a0] = %s
    }
  }
  func.return %t1
}
""")
    run_pipeline(module, "loop-dedupe-loads")
    once = print_module(module)
    run_pipeline(module, "loop-dedupe-loads")
    assert print_module(module) == once


def test_softmax_becomes_one_online_kernel():
    m = build([tensor(f32, 4, 8)], ["x"], lambda b, x: [loopgen.softmax(b, x, 1)])
    m = check_pass(m, "tensor-to-loop")
    (k,) = kernels(m)
    reds = [op for op in k.walk() if isinstance(op, ReduceOp)]
    assert [r.attributes["monoids"] for r in reds] == [("online",)]


def test_matmul_with_prologue_and_epilogue_is_one_kernel():
    def body(b, x, w, bias):
        return [b.ew("maximum", loopgen.matmul(b, b.ew("add", x, bias), w), 0.0)]

    m = build([tensor(f32, 16, 64), tensor(f32, 64, 16), tensor(f32, 64)], ["x", "w", "bias"], body)
    m = check_pass(m, "tensor-to-loop")
    (k,) = kernels(m)
    (red,) = [op for op in k.walk() if isinstance(op, ReduceOp)]
    assert {op.name for op in red.body.ops} >= {"scalar.add", "scalar.mul"}  # the bias add is a prologue
    assert "f32[16,64,16]" not in print_module(m)


def test_sibling_reductions_share_one_loop():
    def body(b, x):
        g = loopgen.matmul(b, x, b.param("gate", tensor(f32, 8, 4)))
        u = loopgen.matmul(b, x, b.param("up", tensor(f32, 8, 4)))
        return [b.ew("mul", b.ew("mul", g, b.ew("sigmoid", g)), u)]

    m = build([tensor(f32, 2, 8)], ["x"], body)
    m = check_pass(m, "tensor-to-loop")
    (k,) = kernels(m)
    (red,) = [op for op in k.walk() if isinstance(op, ReduceOp)]
    assert red.attributes["monoids"] == ("add", "add")
    assert sum(op.name == "loop.load" and op.buffer.name_hint == "x" for op in red.body.ops) == 1


# ---- what fusion must refuse -----------------------------------------------------------------------------------
def test_a_reduction_read_at_two_subscripts_is_not_recomputed():
    """s[i] + s[(i + 1) % n]: inlining would compute each row sum twice."""
    from irforge.index_expr import Dim

    def body(b, x):
        s = b.index_map(b.reduce("add", x, [1]), (6,), [Dim(0), 0])
        nxt = b.index_map(s, (6,), [(Dim(0) + 1) % 6])
        return [b.ew("add", s, nxt)]

    m = build([tensor(f32, 6, 5)], ["x"], body)
    m = check_pass(m, "tensor-to-loop")
    assert len(kernels(m)) == 2


def test_a_reduction_read_by_two_kernels_is_not_recomputed():
    def body(b, x):
        s = b.reduce("add", x, [1])
        return [b.ew("mul", x, s), b.ew("exp", s)]

    m = build([tensor(f32, 3, 5)], ["x"], body)
    m = check_pass(m, "tensor-to-loop")
    reduce_ops = [op for op in m.walk() if isinstance(op, ReduceOp)]
    assert len(reduce_ops) == 1


def _outer_broadcast(b, x, y):
    """y[j, i] * f(x[i]) with f costing a dozen ops: the broadcast runs along the outer loop, so LICM cannot
    hoist f and fusing it computes f once per j."""
    f = x
    for name in ("exp", "tanh", "sigmoid", "sin", "cos", "exp", "tanh", "sigmoid", "sin", "cos", "exp", "tanh"):
        f = b.ew(name, f)
    return [b.ew("mul", y, f)]


@pytest.mark.parametrize(("recompute", "fused"), [("1.0", False), ("8.0", True)])
def test_broadcast_recompute_guard(recompute, fused):
    m = build([tensor(f32, 7), tensor(f32, 9, 7)], ["x", "y"], _outer_broadcast)
    m = check_pass(m, f"lift-to-loop,loop-fuse-elementwise,loop-fuse-broadcast{{max-recompute={recompute}}}")
    assert len(kernels(m)) == (1 if fused else 2)


def test_matmul_prologue_needs_recompute():
    def body(b, x, w, bias):
        return [loopgen.matmul(b, b.ew("add", x, bias), w)]

    m = build([tensor(f32, 4, 8), tensor(f32, 8, 5), tensor(f32, 8)], ["x", "w", "bias"], body)
    m = check_pass(m, "lift-to-loop,loop-fuse-elementwise,loop-fuse-broadcast{max-recompute=0.0},loop-fuse-reductions")
    assert len(kernels(m)) == 2
