"""kernel-dependent-launch: the simulator gives the same answer before and after it on compiled programs (random
shapes and values), and catches what the pass must never produce: an access before the wait of memory the launch
before writes, a prefetch outside its buffer or off the 16-byte grain."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from irforge.dialects.kernel import dependent_launch as DL
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel.types import PtrType

from irforge.compiler import compile
from irforge.diagnostics import IRForgeError
from irforge.interpreter import interpret
from irforge.parser import parse_module
from irforge.target import Target, use_target
from irforge.testing import check_pipeline

BEFORE = "torch-to-tensor,tensor-to-loop,loop-to-tile,lower-to-kernel,cse,dce"


class _Block(torch.nn.Module):
    """RMSNorm, a projection with bias, SiLU and a residual: kernels that reduce, contract and map, chained."""

    def __init__(self, d: int, h: int):
        super().__init__()
        self.norm = torch.nn.RMSNorm(d)
        self.up = torch.nn.Linear(d, h)
        self.down = torch.nn.Linear(h, d, bias=False)

    def forward(self, x):
        return x + self.down(torch.nn.functional.silu(self.up(self.norm(x))))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.integers(1, 3),
    d=st.sampled_from([8, 12, 32, 40]),
    h=st.sampled_from([4, 16, 24, 48]),
    dtype=st.sampled_from([torch.float32, torch.bfloat16]),
    share=st.sampled_from([0.0, 0.25, 1.0]),
    when=st.sampled_from(["always", "idle"]),
)
def test_the_simulator_agrees_before_and_after(rows, d, h, dtype, share, when):
    torch.manual_seed(rows * 1000 + d * 10 + h)
    model = _Block(d, h).to(dtype)
    module = compile(model, torch.randn(rows, d, dtype=dtype), pipeline=BEFORE).module
    options = f"prefetch-l2-share={share} prefetch-when={when}"
    after = check_pipeline(module, f"kernel-dependent-launch{{{options}}}", seeds=(0, 1))
    kernels = [o for o in after.walk() if isinstance(o, K.KernelFuncOp)]
    assert kernels
    for k in kernels:  # the wait, once, at the top level; nothing but prefetches before it
        waits = [i for i, o in enumerate(k.body.ops) if isinstance(o, DL.GridDepWaitOp)]
        assert len(waits) == 1
        assert isinstance(k.body.ops[waits[0] + 1], DL.GridDepLaunchDependentsOp)
        early = [o for o in k.body.ops[: waits[0]] for o in o.walk()]
        assert not any(isinstance(o, (K.LoadOp, K.StoreOp, K.AtomicOp)) for o in early)
        behind = when == "always" or not _launched_first(k, after)  # idle: the launch before is a small one
        assert any(isinstance(o, DL.PrefetchL2Op) for o in early) == (share > 0 and _takes_weights(k, after) and behind)


def _launched_first(kernel, module) -> bool:
    launches = [o for o in module.walk() if isinstance(o, K.LaunchOp)]
    return launches[0].callee_op() is kernel


def _takes_weights(kernel, module) -> bool:
    """Whether the launch of `kernel` binds a pointer parameter to a kernel.param of 16 bytes or more (a weight
    the pass prefetches; a tensor map's weight is not)."""
    launch = next(o for o in module.walk() if isinstance(o, K.LaunchOp) and o.callee_op() is kernel)
    return any(
        isinstance(t, PtrType) and isinstance(v.owner, K.ParamOp) and v.type.numel * v.type.dtype.bytes >= 16
        for v, t in zip(launch.args, kernel.attributes["function_type"].inputs)
    )


def test_the_blocks_shares_tile_each_weight_at_full_share():
    pipeline = BEFORE + ",kernel-dependent-launch{prefetch-l2-share=0.5}"
    module = compile(_Block(32, 48), torch.randn(2, 32), pipeline=pipeline).module
    seen = 0
    for k in (o for o in module.walk() if isinstance(o, K.KernelFuncOp)):
        blocks = k.attributes["grid"][0] * k.attributes["grid"][1] * k.attributes["grid"][2]
        for pf in (o for o in k.walk() if isinstance(o, DL.PrefetchL2Op)):
            nbytes = _weight_bytes(module, k, pf)
            spans = []
            for b in range(blocks):  # the guard lets a block through when its share starts inside the weight
                dims = [b if _is_block_id(v) else 0 for v in pf.index_operands]
                start = pf.exprs("index")[0].evaluate(dims) * pf.mem.type.dtype.bytes
                if start < nbytes:
                    spans.append((start, pf.exprs("bytes")[0].evaluate(dims)))
            spans.sort()
            assert spans[0][0] == 0 and all(s + n == t for (s, n), (t, _) in itertools.pairwise(spans))
            assert spans[-1][0] + spans[-1][1] == nbytes // 16 * 16
            seen += 1
    assert seen == 2  # the norm's weight (3 blocks: shares of 3, 3 and 2 pieces) and the bias; the projections take
    # their weights by tensor map, which the pass leaves alone


def _weight_bytes(module, kernel, pf) -> int:
    i = kernel.body.args.index(pf.mem)
    launch = next(o for o in module.walk() if isinstance(o, K.LaunchOp) and o.callee_op() is kernel)
    t = launch.args[i].type
    return t.numel * t.dtype.bytes


def _is_block_id(v) -> bool:
    op = v.owner
    return isinstance(op, K.IndexOp) and any(isinstance(o.owner, K.BlockIdOp) for o in op.operands)


DEPENDENT = """
kernel.func @k_fill(%y: !kernel.ptr<f32>) grid(1) block(32) {
  %t = kernel.thread_id x
  %c = kernel.const 1.0 : f32
  kernel.store %c, %y[%t]
}
kernel.func @k_read(%y: !kernel.ptr<f32>, %w: !kernel.ptr<f32>, %z: !kernel.ptr<f32>) grid(1) block(32) {
  %t = kernel.thread_id x
  EARLY
  kernel.griddepcontrol_wait
  LATE
  %b = kernel.load %w[%t] : f32
  %s = kernel.add %a, %b : f32
  kernel.store %s, %z[%t]
}
func.func @forward() -> f32[32] {
  %w = kernel.param @w : f32[32]
  %y = kernel.alloc : f32[32]
  %z = kernel.alloc : f32[32]
  kernel.launch @k_fill(%y)
  kernel.launch @k_read(%y, %w, %z)
  func.return %z
}
"""
LOAD = "%a = kernel.load %y[%t] : f32"


def test_a_read_before_the_wait_of_what_the_launch_before_writes_is_caught():
    good = parse_module(DEPENDENT.replace("EARLY", "").replace("LATE", LOAD))
    w = np.arange(32, dtype=np.float32)
    np.testing.assert_array_equal(interpret(good, params={"w": w})[0], 1.0 + w)
    bad = parse_module(DEPENDENT.replace("EARLY", LOAD).replace("LATE", ""))
    why = "reads element 0 of %y before kernel.griddepcontrol_wait, but the launch before this one writes it"
    with pytest.raises(IRForgeError, match=re.escape(why)):
        interpret(bad)


@pytest.mark.parametrize(
    ("prefetch", "why"),
    [
        ("kernel.prefetch_l2 %w[%t * 4], 16", "prefetches bytes 128 .. 144 of param @w, outside its 128"),
        ("kernel.prefetch_l2 %w[2], 16", "prefetches 16 bytes from byte 8: the start 16-byte aligned"),
        ("kernel.prefetch_l2 %w[0], 24", "prefetches 24 bytes from byte 0"),
    ],
)
def test_a_prefetch_outside_its_buffer_or_off_the_grain_is_caught(prefetch, why):
    module = parse_module(DEPENDENT.replace("EARLY", prefetch).replace("LATE", LOAD))
    with pytest.raises(IRForgeError, match=re.escape(why)):
        interpret(module)


def test_before_sm90_the_pass_does_nothing_and_the_emitter_refuses_the_ops():
    from irforge.pass_manager import run_pipeline

    module = compile(_Block(8, 4), torch.randn(1, 8), pipeline=BEFORE).module
    with use_target(Target(arch="sm_80")):
        run_pipeline(module, "kernel-dependent-launch")
        assert not any(isinstance(o, DL.GridDepWaitOp) for o in module.walk())
        waiting = parse_module(DEPENDENT.replace("EARLY", "").replace("LATE", LOAD))
        why = "needs sm_90 or later (programmatic dependent launch), and the target is sm_80"
        with pytest.raises(IRForgeError, match=re.escape(why)):
            run_pipeline(waiting, "kernel-to-cuda")
