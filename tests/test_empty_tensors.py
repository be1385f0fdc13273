"""Size-0 dimensions and 0-d tensors, end to end: an empty result is no kernel (its buffer is never written), a
reduction over an empty axis is its identity, and a scalar keeps its shape [] at every level. Each program is
checked against PyTorch eager by the level's reference interpreter (the SIMT simulator at the kernel level)."""

from __future__ import annotations

import io

import pytest
from irforge.tools.cli import main

PROGRAMS = [
    "torch.randn(4, 0).exp()",
    "torch.randn(4, 0).sum(0)",
    "torch.randn(4, 0).sum(1)",
    "torch.randn(0, 5) @ torch.randn(5, 4)",
    "torch.randn(4, 0) @ torch.randn(0, 5)",
    "x = torch.randn(0, 4); torch.cat([x, x + 1], 0)",
    "x = torch.randn(0, 4); torch.cat([x, torch.randn(3, 4)], 0)",
    "torch.softmax(torch.randn(3, 0), 0)",
    "torch.randn(2, 0, 3).permute(2, 0, 1) * 2",
    "F.scaled_dot_product_attention(torch.randn(1, 2, 3, 8), torch.randn(1, 2, 0, 8), torch.randn(1, 2, 0, 8))",
    "nn.Linear(4, 3)(torch.randn(0, 4))",
    "torch.randn(()).exp() * 2",
    "torch.randn(()).sum()",
    "torch.randn(()) + torch.randn(4)",
    # ops along a dim take a 0-d tensor's dim 0 or -1 as its one element
    "torch.randn(()).softmax(0)",
    "torch.randn(()).log_softmax(-1)",
    "torch.randn(()).max(0, keepdim=True).values * torch.randn(()).argmax(0)",
    "torch.randn(()).min(-1).indices",
    "torch.randn(()).gather(0, torch.zeros((), dtype=torch.long)) + torch.randn(()).flip(0)",
    "torch.randn(()).index_select(0, torch.zeros(1, dtype=torch.long))",
    "torch.randn(()).transpose(0, -1) * torch.randn(()).t()",
]


def compile_and_check(snippet: str, level: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(["compile", "-c", snippet, "--ir", level, "--check"], stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("snippet", PROGRAMS)
@pytest.mark.parametrize("level", ["torch", "kernel"])
def test_matches_eager(snippet, level):
    rc, _out, err = compile_and_check(snippet, level)
    assert rc == 0, err
    checks = [line for line in err.splitlines() if line.startswith("check: output")]
    assert checks and all(line.endswith(": ok") for line in checks), err


def test_an_empty_result_is_no_kernel():
    rc, out, err = compile_and_check("torch.randn(4, 0).exp() + torch.randn(4, 1)", "kernel")
    assert rc == 0, err
    assert "kernel.func" not in out and "kernel.launch" not in out
    assert "kernel.alloc : f32[4,0]" in out


def test_a_reduction_over_an_empty_axis_is_its_identity():
    rc, out, err = compile_and_check("torch.randn(4, 0).sum(1) + 1", "loop")
    assert rc == 0, err
    assert "loop.reduce" not in out  # the sum of nothing is 0: no reduction loop reaches the schedule
    assert "loop.for %a0 in 0..4" in out
