"""kernel-hoist-loads: the simulator gives the same answer before and after it on compiled programs (random shapes
and values); no load moves above the wait for the launch before; nothing moves without a budget; loads move
ahead of a loop or a barrier (RMSNorm's second read of its row and its weight)."""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from irforge.dialects.kernel import dependent_launch as DL
from irforge.dialects.kernel import ops as K

from irforge.compiler import compile
from irforge.printer import print_module
from irforge.target import Target, use_target
from irforge.testing import check_pipeline

BEFORE = "torch-to-tensor,tensor-to-loop,loop-to-tile,lower-to-kernel,kernel-dependent-launch,cse,dce"
HOPPER = Target("sm_90a")  # where kernels wait for the launch before


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
    with use_target(HOPPER):
        module = compile(model, torch.randn(rows, d, dtype=dtype), pipeline=BEFORE).module
        after = check_pipeline(module, f"kernel-hoist-loads{{max-bytes={max_bytes}}}", seeds=(0, 1))
    if max_bytes == 0:
        assert print_module(after) == print_module(module)
    for kernel in [o for o in after.walk() if isinstance(o, K.KernelFuncOp)]:
        ops = kernel.body.ops
        wait = next(i for i, o in enumerate(ops) if isinstance(o, DL.GridDepWaitOp))
        assert not any(isinstance(o, K.LoadOp) for o in ops[:wait])  # the launch before may write what it reads


def test_rms_norm_reads_its_row_and_weight_before_the_statistics():
    """torch.nn.RMSNorm over one row of 64: both second reads (x and the weight) move ahead of the reduction loop."""
    with use_target(HOPPER):
        module = compile(torch.nn.RMSNorm(64), torch.randn(1, 64), pipeline=BEFORE).module
        after = check_pipeline(module, "kernel-hoist-loads", seeds=(0, 1, 2))
    (kernel,) = [o for o in module.walk() if isinstance(o, K.KernelFuncOp)]
    assert [ld.mem.name_hint for ld in _loads_after_control(kernel)] == ["x", "weight"]
    (kernel,) = [o for o in after.walk() if isinstance(o, K.KernelFuncOp)]
    assert _loads_after_control(kernel) == []
    ops = kernel.body.ops  # both behind the wait
    wait = next(i for i, o in enumerate(ops) if isinstance(o, DL.GridDepWaitOp))
    assert not any(isinstance(o, K.LoadOp) for o in ops[:wait])
