"""kernel-hoist-loads: the simulator gives the same answer before and after it on compiled programs (random shapes
and values), the loads it moves read buffers no kernel of the launch writes, and they move ahead of a loop or a
barrier (RMSNorm's second read of its row)."""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel.ops.host import written_params

from irforge.compiler import compile
from irforge.testing import check_pipeline

BEFORE = "torch-to-tensor,tensor-to-loop,loop-to-tile,lower-to-kernel,cse,dce"


class _NormSoftmax(torch.nn.Module):
    """RMSNorm, a projection and a softmax over its rows: kernels that read their inputs again after a reduction."""

    def __init__(self, d: int, h: int):
        super().__init__()
        self.norm = torch.nn.RMSNorm(d)
        self.proj = torch.nn.Linear(d, h, bias=False)

    def forward(self, x):
        return torch.softmax(self.proj(self.norm(x)), dim=-1)


def _loads_after_control(kernel: K.KernelFuncOp) -> list[K.LoadOp]:
    """Top-level loads of global memory that come after a loop or a barrier of the kernel's body."""
    out, behind = [], False
    for op in kernel.body.ops:
        behind |= bool(op.regions) or isinstance(op, K.BarrierOp)
        if behind and isinstance(op, K.LoadOp) and op.mem in kernel.body.args:
            out.append(op)
    return out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.integers(1, 3),
    d=st.sampled_from([16, 32, 64, 256]),
    h=st.sampled_from([8, 32, 64]),
    dtype=st.sampled_from([torch.float32, torch.bfloat16]),
    max_bytes=st.sampled_from([0, 16, 64, 128]),
)
def test_the_simulator_agrees_before_and_after(rows, d, h, dtype, max_bytes):
    torch.manual_seed(rows * 1000 + d * 10 + h)
    model = _NormSoftmax(d, h).to(dtype)
    module = compile(model, torch.randn(rows, d, dtype=dtype), pipeline=BEFORE).module
    after = check_pipeline(module, f"kernel-hoist-loads{{max-bytes={max_bytes}}}", seeds=(0, 1))
    before_kernels = [o for o in module.walk() if isinstance(o, K.KernelFuncOp)]
    after_kernels = [o for o in after.walk() if isinstance(o, K.KernelFuncOp)]
    for k0, k1 in zip(before_kernels, after_kernels):
        written = {k1.body.args[i].name_hint for i in written_params(k1)}
        was, now = _places(k0), _places(k1)
        assert sorted(k for k, _ in was) == sorted(k for k, _ in now)  # the same loads, none added or dropped
        for (key, c0), (_, c1) in zip(sorted(was), sorted(now)):
            assert c1 <= c0  # only ever earlier
            assert c1 == c0 or (max_bytes > 0 and key[0] not in written)  # a written buffer's load stays


def _places(kernel: K.KernelFuncOp) -> list[tuple[tuple, int]]:
    """Each top-level load of the kernel (its buffer, subscript and type) with the loops and barriers before it."""
    out, control = [], 0
    for op in kernel.body.ops:
        control += bool(op.regions) or isinstance(op, K.BarrierOp)
        if isinstance(op, K.LoadOp):
            out.append(((op.mem.name_hint, str(op.attributes["index"]), str(op.result.type)), control))
    return out


def test_rms_norm_reads_its_row_and_weight_before_the_statistics():
    """torch.nn.RMSNorm over one row of 64: both second reads (x and the weight) move ahead of the reduction loop."""
    module = compile(torch.nn.RMSNorm(64), torch.randn(1, 64), pipeline=BEFORE).module
    (kernel,) = [o for o in module.walk() if isinstance(o, K.KernelFuncOp)]
    assert [ld.mem.name_hint for ld in _loads_after_control(kernel)] == ["x", "weight"]
    after = check_pipeline(module, "kernel-hoist-loads", seeds=(0, 1, 2))
    (kernel,) = [o for o in after.walk() if isinstance(o, K.KernelFuncOp)]
    assert _loads_after_control(kernel) == []
