"""The tensor dialect: syntax round trips, verifier rules, interpreter semantics (checked against numpy by hand)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from irforge.dialects.tensor import IndexMapOp
from irforge.dialects.tensor import interpreter as ti
from irforge.dialects.tensor.builder import TensorBuilder

from irforge.builtin import FuncOp, ModuleOp, ReturnOp
from irforge.diagnostics import IRForgeError
from irforge.hashing import structurally_equal
from irforge.index_expr import AffineMap, Const, Dim
from irforge.interpreter import interpret
from irforge.parser import parse_module
from irforge.printer import print_module
from irforge.testing.strategies import tensor_programs
from irforge.types import TensorType, f32
from irforge.verifier import verify

SAMPLE = """\
func.func @forward(%x: f32[2,3], %ids: i64[2,5]) -> (f32[3,2], f32[2,5,3], f32[2,3], f16[2,3], bool[2,3]) {
  %w = tensor.param @norm.weight : f32[3]
  %c = tensor.constant 1e-06 : f32[2,3]
  %i = tensor.iota dim 1 : i64[2,3]
  %b = tensor.index_map %w[d1] : f32[2,3]
  %y = tensor.elementwise mul %x, %b : f32[2,3]
  %z = tensor.elementwise add %y, %c : f32[2,3]
  %h = tensor.elementwise cast %z : f16[2,3]
  %s = tensor.reduce max %z axes [1] : f32[2,1]
  %sb = tensor.index_map %s[d0, 0] : f32[2,3]
  %t = tensor.index_map %z[d1, d0] : f32[3,2]
  %g = tensor.gather %x[%ids[d0, d1], d2] : f32[2,5,3]
  %r = tensor.index_map %x[(d0 * 3 + d1) floordiv 3, (d0 * 3 + d1) mod 3] : f32[2,3]
  %m = tensor.elementwise lt %i, %i : bool[2,3]
  %n = tensor.elementwise sub %z, %sb : f32[2,3]
  func.return %t, %g, %n, %h, %m
}
"""


def test_sample_round_trips():
    m = parse_module(SAMPLE)
    assert print_module(m) == SAMPLE
    generic = print_module(m, generic=True)
    assert structurally_equal(parse_module(generic), m)
    assert print_module(parse_module(generic)) == SAMPLE


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensor_programs())
def test_random_programs_round_trip(module):
    verify(module)
    text = print_module(module)
    again = parse_module(text)
    assert print_module(again) == text
    assert structurally_equal(again, module)
    assert structurally_equal(parse_module(print_module(module, generic=True)), module)


def test_interpreter_matches_numpy():
    m = parse_module(SAMPLE)
    x = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]], np.float32)
    ids = np.array([[0, 1, 1, 0, 1], [1, 1, 0, 0, 0]])
    w = np.array([2.0, 3.0, 0.5], np.float32)
    t, g, n, h, mask = interpret(m, {"x": x, "ids": ids}, {"norm.weight": w})
    z = x * w + np.float32(1e-6)
    np.testing.assert_array_equal(t, z.T)
    np.testing.assert_array_equal(g, x[ids])
    np.testing.assert_array_equal(n, z - z.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(h, z.astype(np.float16))
    assert not mask.any()


def test_interpreter_half_math_rounds_per_op():
    m = parse_module(
        "func.func @forward(%a: bf16[3], %b: bf16[3]) -> bf16[3] {\n"
        "  %s = tensor.elementwise add %a, %b : bf16[3]\n  func.return %s\n}\n"
    )
    a = np.array([1.0, 256.0, 3.0], np.float32)
    b = np.array([2.0**-8, 1.0, 2.0**-7], np.float32)
    (s,) = interpret(m, [a, b])
    # bf16 keeps 8 significant bits: 1 + 2^-8 ties to even (1.0), 256 + 1 rounds to 256, 3 + 2^-7 -> 3.0
    np.testing.assert_array_equal(s, [1.0, 256.0, 3.0])


def test_interpreter_cast_semantics():
    m = parse_module(
        "func.func @forward(%a: f32[4]) -> (i64[4], bool[4]) {\n"
        "  %i = tensor.elementwise cast %a : i64[4]\n  %b = tensor.elementwise cast %a : bool[4]\n"
        "  func.return %i, %b\n}\n"
    )
    i, b = interpret(m, [np.array([1.7, -1.7, 0.0, 2.5], np.float32)])
    np.testing.assert_array_equal(i, [1, -1, 0, 2])
    np.testing.assert_array_equal(b, [True, True, False, True])


def test_missing_params_are_reproducible():
    m = parse_module(SAMPLE)
    a = interpret(m, seed=3)
    b = interpret(m, seed=3)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_gather_index_out_of_range_is_reported():
    m = parse_module(SAMPLE)
    with pytest.raises(IRForgeError, match=r"gather index 7 is out of range 0\.\.1"):
        interpret(m, {"ids": np.full((2, 5), 7)})


@pytest.mark.parametrize(
    "line, message",
    [
        ("%b = tensor.elementwise add %x, %w : f32[2,3]", "elementwise operands must have the result's shape"),
        ("%b = tensor.index_map %x[d0 + 1, d1] : f32[2,3]", "ranges over 1..2, outside 0..1"),
        ("%b = tensor.index_map %x[d0, d2] : f32[2,3]", "uses d2 but has only 2 dimensions"),
        ("%b = tensor.index_map %x[d0, %w] : f32[2,3]", "cannot appear in an index"),
        ("%b = tensor.elementwise frob %x : f32[2,3]", "unknown scalar op 'frob'"),
        ("%b = tensor.elementwise add %x, %x : f16[2,3]", "'add' of f32, f32 gives f32, not f16"),
        ("%b = tensor.reduce add %x axes [1] : f32[2]", "gives f32[2,1], not f32[2]"),
        ("%b = tensor.reduce add %x axes [1, 0] : f32[1,1]", "distinct dimensions of f32[2,3], in increasing order"),
        ("%b = tensor.reduce sum %x axes [1] : f32[2,1]", "unknown reduction 'sum'"),
        ("%b = tensor.gather %x[%w[d0], d1] : f32[2,3]", "indices must be an integer tensor"),
        ("%b = tensor.gather %x[d0, d1] : f32[2,3]", "exactly one indexed coordinate"),
        ("%b = tensor.iota dim 2 : i64[2,3]", "dim 2 is not a dimension"),
        ("%b = tensor.iota dim 0 : f32[2,3]", "needs an integer element type"),
        ("%b = tensor.constant 1.5 : i64[2]", "needs an integer"),
        ("%b = tensor.constant 1 : bool[2]", "needs true or false"),
    ],
)
def test_verifier_rejects(line, message):
    text = f"func.func @f(%x: f32[2,3], %w: f32[3]) {{\n  {line}\n  func.return\n}}\n"
    with pytest.raises(IRForgeError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")) as e:
        parse_module(text)
    assert e.value.loc.file_line_col().line == 2


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.integers(1, 4), min_size=2, max_size=4),
    st.data(),
)
def test_contraction_fast_path_matches_materializing(shape, data):
    """reduce(add, mul(index_map a, index_map b)) evaluated with einsum equals the op-by-op evaluation."""
    r = len(shape)

    def projection():  # a map reading a subset of the product's dims (maybe repeated), or 0 on size-1 dims
        picks = data.draw(st.lists(st.integers(0, r - 1), min_size=1, max_size=r))
        src = [shape[p] for p in picks]
        exprs = [Const(0) if data.draw(st.booleans()) and n == 1 else Dim(p) for p, n in zip(picks, src)]
        return src, exprs

    (sa, ea), (sb, eb) = projection(), projection()
    func = FuncOp.build("forward", [TensorType(f32, tuple(sa)), TensorType(f32, tuple(sb))], [])
    b = TensorBuilder(block=func.body)
    a, c = func.body.args
    ma = b.insert(IndexMapOp([a], [TensorType(f32, tuple(shape))], {"map": AffineMap(r, tuple(ea))}))
    mb = b.insert(IndexMapOp([c], [TensorType(f32, tuple(shape))], {"map": AffineMap(r, tuple(eb))}))
    axes = data.draw(st.lists(st.integers(0, r - 1), min_size=1, max_size=r, unique=True))
    out = b.reduce("add", b.ew("mul", ma, mb), axes)
    func.body.append(ReturnOp([out]))
    func.attributes["function_type"] = type(func.attributes["function_type"])(
        func.attributes["function_type"].inputs, (out.type,)
    )
    module = ModuleOp()
    module.body.append(func)
    verify(module)
    assert ti._find_contractions(func)[0], "the fast path should apply"
    (fast,) = interpret(module, seed=1)
    original = ti._find_contractions
    try:
        ti._find_contractions = lambda f: ({}, set())
        (slow,) = interpret(module, seed=1)
    finally:
        ti._find_contractions = original
    np.testing.assert_allclose(fast, slow, rtol=1e-5, atol=1e-5)
