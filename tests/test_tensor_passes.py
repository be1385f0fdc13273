"""Passes on the tensor level: numerically neutral on random programs (hypothesis), and doing what they promise."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from irforge.parser import parse_module
from irforge.printer import print_module
from irforge.testing import check_pipeline
from irforge.testing.strategies import tensor_programs

PASSES = ["tensor-compose-index-maps", "tensor-fold-constants", "cse", "dce"]


@pytest.mark.parametrize("pipeline", [*PASSES, ",".join(PASSES)])
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(module=tensor_programs())
def test_pass_preserves_values(pipeline, module):
    check_pipeline(module, pipeline, seeds=(0,))


def ops(module) -> list[str]:
    return [op.name for op in module.walk() if op.name.startswith("tensor.")]


def run(text: str, pipeline: str):
    return check_pipeline(parse_module(text), pipeline)


def test_reshape_and_its_inverse_vanish():
    after = run(
        "func.func @forward(%x: f32[6,4]) -> f32[6,4] {\n"
        "  %a = tensor.index_map %x[d0 floordiv 4, d0 mod 4] : f32[24]\n"
        "  %b = tensor.index_map %a[d0 * 4 + d1] : f32[6,4]\n"
        "  func.return %b\n}\n",
        "tensor-compose-index-maps",
    )
    assert ops(after) == []


def test_chains_compose_into_one_simplified_map():
    after = run(
        "func.func @forward(%x: f32[3,5]) -> f32[2,5,3] {\n"
        "  %t = tensor.index_map %x[d1, d0] : f32[5,3]\n"
        "  %b = tensor.index_map %t[d1, d2] : f32[2,5,3]\n"
        "  func.return %b\n}\n",
        "tensor-compose-index-maps",
    )
    assert "tensor.index_map %x[d2, d1] : f32[2,5,3]" in print_module(after)
    assert ops(after) == ["tensor.index_map"]


def test_gather_absorbs_index_maps():
    after = run(
        "func.func @forward(%w: f32[10,4], %ids: i64[3]) -> f32[2,3,4] {\n"
        "  %t = tensor.index_map %w[d1, d0] : f32[4,10]\n"
        "  %i = tensor.index_map %ids[d1] : i64[2,3]\n"
        "  %g = tensor.gather %t[d2, %i[d0, d1]] : f32[2,3,4]\n"
        "  func.return %g\n}\n",
        "tensor-compose-index-maps",
    )
    assert "tensor.gather %w[%ids[d1], d2] : f32[2,3,4]" in print_module(after)


def test_constants_fold_through_everything():
    after = run(
        "func.func @forward(%x: f32[2,3]) -> (f32[2,3], f32[2,1]) {\n"
        "  %a = tensor.constant 2.0 : f32[3]\n"
        "  %b = tensor.constant 0.5 : f32[3]\n"
        "  %c = tensor.elementwise mul %a, %b : f32[3]\n"
        "  %d = tensor.index_map %c[d1] : f32[2,3]\n"
        "  %y = tensor.elementwise mul %x, %d : f32[2,3]\n"
        "  %s = tensor.reduce add %d axes [1] : f32[2,1]\n"
        "  func.return %y, %s\n}\n",
        "tensor-fold-constants",
    )
    text = print_module(after)
    assert ops(after) == ["tensor.constant"], text  # x * 1 is x; the sum of three ones is a constant
    assert "tensor.constant 3.0 : f32[2,1]" in text


def test_half_constants_fold_with_rounding():
    after = run(
        "func.func @forward() -> bf16[2] {\n"
        "  %a = tensor.constant 1.0 : bf16[2]\n"
        "  %b = tensor.constant 0.00390625 : bf16[2]\n"
        "  %c = tensor.elementwise add %a, %b : bf16[2]\n"
        "  func.return %c\n}\n",
        "tensor-fold-constants",
    )
    assert "tensor.constant 1.0 : bf16[2]" in print_module(after)  # 1 + 2^-8 rounds to 1 in bf16


def test_select_on_a_known_condition():
    after = run(
        "func.func @forward(%x: f32[4], %y: f32[4]) -> f32[4] {\n"
        "  %c = tensor.constant false : bool[4]\n"
        "  %s = tensor.elementwise select %c, %x, %y : f32[4]\n"
        "  func.return %s\n}\n",
        "tensor-fold-constants",
    )
    assert ops(after) == []
