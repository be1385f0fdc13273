"""The cuda dialect: raw CUDA source blocks round-trip verbatim; host programs verify."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from irforge.dialects.cuda.ops import CudaKernelOp, source_block_ok
from irforge.dialects.kernel.types import PtrType

from irforge.diagnostics import IRForgeError
from irforge.hashing import structurally_equal
from irforge.parser import parse_module
from irforge.printer import print_module
from irforge.types import ScalarType

SAMPLE = """\
cuda.kernel @k_add(!kernel.ptr<f32>, !kernel.ptr<f32>, !kernel.ptr<f32>) grid(4, 2) block(256) smem(0) {{{
// "quotes", \\backslashes\\, braces }}} mid-line, and ✓ unicode
extern "C" __global__ void k_add(const float* a, const float* b, float* c) {
  c[threadIdx.x] = a[threadIdx.x] + b[threadIdx.x];
}
}}}
cuda.program @forward {
  %a = cuda.input 0 : f32[1024]
  %w = cuda.param @layers.0.weight : f32[1024]
  %c = cuda.alloc : f32[1024]
  cuda.launch @k_add(%a, %w, %c)
  %v = cuda.view %c : f32[32,32]
  cuda.output %v
}
"""


def test_sample_round_trips():
    m = parse_module(SAMPLE)
    assert print_module(m) == SAMPLE
    k = m.body.ops[0]
    assert k.attributes["source"].startswith('// "quotes", \\backslashes\\')
    assert k.attributes["grid"] == (4, 2, 1)
    assert structurally_equal(parse_module(print_module(m, generic=True)), m)


def _kernel_with(source: str) -> str:
    op = CudaKernelOp(
        (),
        (),
        {
            "sym_name": "k",
            "params": (PtrType(ScalarType("f32")),),
            "grid": (1, 1, 1),
            "block": (32, 1, 1),
            "smem": 0,
            "source": source,
        },
    )
    from irforge.builtin import ModuleOp

    m = ModuleOp()
    m.body.append(op)
    return print_module(m)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('{}}\n "\\ab/✓*;')), max_size=60))
def test_any_source_round_trips(source):
    text = _kernel_with(source)
    m = parse_module(text)
    assert m.body.ops[0].attributes["source"] == source
    assert print_module(m) == text
    assert ("{{{\n" + source + "}}}" in text) == source_block_ok(source)


def test_source_with_closing_braces_at_a_line_start_falls_back_to_a_string():
    source = "x\n}}} y\n"
    text = _kernel_with(source)
    assert 'source = "x\\n}}} y\\n"' in text
    assert parse_module(text).body.ops[0].attributes["source"] == source


@pytest.mark.parametrize(
    "program,message",
    [
        ("  %a = cuda.input 0 : f32[4]\n  cuda.launch @k(%a, %a)\n  cuda.output %a\n", "passes 2 argument(s)"),
        ("  %a = cuda.input 0 : i32[4]\n  cuda.launch @k(%a)\n  cuda.output %a\n", "cannot bind parameter type"),
        ("  %a = cuda.input 1 : f32[4]\n  cuda.output %a\n", "input positions must be 0..0"),
        ("  %a = cuda.input 0 : f32[4]\n", "must end with cuda.output"),
        ("  %a = cuda.input 0 : f32[4]\n  cuda.launch @nope(%a)\n  cuda.output %a\n", "not a cuda.kernel"),
    ],
)
def test_program_errors(program, message):
    head = "cuda.kernel @k(!kernel.ptr<f32>) grid(1) block(32) smem(0) {{{\n}}}\n"
    with pytest.raises(IRForgeError) as e:
        parse_module(head + "cuda.program @forward {\n" + program + "}\n")
    assert message in str(e.value)
