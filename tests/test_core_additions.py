"""Core additions made for the frontend: the `none` attribute, op families, the `cast` scalar op, `interpret`."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from irforge.attributes import attr_key, to_attr
from irforge.dialect import Dialect
from irforge.hashing import structurally_equal
from irforge.ir import Operation
from irforge.parser import parse_module
from irforge.printer import format_attr, print_module
from irforge.scalar_ops import SCALAR_OPS, evaluate
from irforge.types import bf16, f16, f32, i32


def test_none_attribute_round_trips():
    text = '%0 = "test.op"() {args = [1, none, "none", [none]], none = none} : () -> f32\n'
    m = parse_module(text, allow_unregistered=True)
    op = m.body.ops[0]
    assert op.attributes["args"] == (1, None, "none", (None,))
    assert print_module(m) == text.replace("none = none", '"none" = none')
    assert structurally_equal(parse_module(print_module(m), allow_unregistered=True), m)


def test_none_attribute_is_its_own_kind():
    assert to_attr(None) is None
    assert format_attr(None) == "none"
    assert attr_key(None) != attr_key(0) and attr_key(None) != attr_key(False)


def test_op_family_names_are_checked():
    class Family(Operation):
        name = "fam.x."

    class Misnamed(Operation):
        name = "fam.x"

    Dialect("fam", "a family", op_families=(Family,))
    with pytest.raises(ValueError, match=r"must be named fam\.<prefix>\."):
        Dialect("fam", "a family", op_families=(Misnamed,))


def test_cast_is_a_scalar_op_with_a_stated_result():
    cast = SCALAR_OPS["cast"]
    with pytest.raises(ValueError, match="cannot be inferred"):
        cast.result_type([f16])
    np.testing.assert_array_equal(evaluate("cast", [np.array([2.5, -2.5, 1e9])], i32)[:2], [2, -2])
    np.testing.assert_array_equal(evaluate("cast", [np.array([1 + 2**-9], np.float32)], bf16), [1.0])
    np.testing.assert_array_equal(evaluate("cast", [np.array([65520.0], np.float32)], f16), [np.inf])


@settings(max_examples=50, deadline=None)
@given(
    high=st.lists(st.integers(0, 2**16 - 1), min_size=1, max_size=64),
    low=st.lists(st.sampled_from([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF]) | st.integers(0, 2**16 - 1), min_size=64),
    shape_0d=st.booleans(),
)
def test_bf16_rounding_is_torchs(high, low, shape_0d):
    """Any float32 bit pattern (normals, subnormals, ties and their neighbours in the 16 bits bf16 drops, the
    largest finite values, infinities, NaNs) rounds to bf16 as torch's `to(torch.bfloat16)` does, keeps a 0-d
    array 0-d, and leaves the input as it was."""
    bits = [h << 16 | lo for h, lo in zip(high, low)]
    import torch

    from irforge.scalar_ops import quantize

    x = np.array(bits, dtype=np.uint32).view(np.float32)
    x = x[:1].reshape(()) if shape_0d else x
    before = x.copy()
    got = quantize(x, bf16)
    want = torch.from_numpy(np.atleast_1d(x).copy()).to(torch.bfloat16).float().numpy().reshape(x.shape)
    assert got.shape == x.shape and got.dtype == np.float32
    np.testing.assert_array_equal(got, want)  # NaN where torch has NaN
    np.testing.assert_array_equal(x.view(np.uint32), before.view(np.uint32))


def test_half_operands_compute_in_f32():
    a = np.array([2048.0], np.float16)
    b = np.array([1.0], np.float16)
    # 2048 + 1 is not an f16; computing in f32 then rounding gives 2048 (ties to even) exactly once
    np.testing.assert_array_equal(evaluate("add", [a, b], f16), [2048.0])
    np.testing.assert_array_equal(evaluate("exp", [np.array([1.0], np.float16)], f16), [np.float16(np.e)])


def test_exp_flush_drops_only_results_below_the_smallest_normal_float():
    x = np.array([-100.0, -87.0, 0.0, -np.inf, np.nan], np.float32)
    got = evaluate("exp_flush", [x], f32)
    np.testing.assert_array_equal(got[[0, 2, 3]], [0.0, 1.0, 0.0])
    assert got[1] == np.float32(np.exp(np.float32(-87.0))) > 0 and np.isnan(got[4])


def test_interpret_runs_a_module_without_level_ops():
    from irforge.interpreter import interpret

    m = parse_module("func.func @forward(%x: f32[2]) -> f32[2] {\n  func.return %x\n}\n")
    (y,) = interpret(m, [np.array([1.0, 2.0], np.float32)])
    np.testing.assert_array_equal(y, [1.0, 2.0])
