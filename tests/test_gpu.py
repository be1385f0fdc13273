"""On a GPU: the emitted kernels run and agree with numpy, torch and the simulator (skipped without a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from irforge.runtime import has_gpu

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU")]


def _examples():
    from irforge.dialects.kernel import examples as E

    return [
        E.vector_add(1 << 16, "f32"),
        E.vector_add(1 << 16, "bf16"),
        E.silu_mul(64, 1024, "bf16"),
        E.row_sum(37, 1000, block=256),
        E.rms_norm(64, 2048, "f32"),
        E.rms_norm(64, 2048, "bf16"),
        E.softmax(64, 2048, "f32"),
        E.softmax(64, 4096, "bf16"),
        E.rms_norm_registers(64, 4096, "bf16"),
        E.softmax_registers(64, 2048, "f32"),
        E.cp_async_scale(1 << 16, tiles_per_block=8, block=128),
        E.tma_scale(256, 512, box_rows=32, box_cols=64, block=256),
        E.tma_scale(256, 512, box_rows=32, box_cols=16, block=256, swizzle=32),
        E.tma_scale(256, 512, box_rows=32, box_cols=64, block=256, swizzle=128),
        E.mma_linear(64, 64, 256),
        E.wgmma_linear(64, 256, bk=64, warpgroups=2),
        E.wgmma_registers_a(64, 512, bk=64, warpgroups=2),
        E.wgmma_registers_a(32, 256, bk=32, dtype="f16"),
        E.wgmma_registers_a(16, 128, bk=16),
    ]


@pytest.mark.parametrize("ex", _examples(), ids=lambda e: e.name)
def test_example_on_gpu(ex):
    from irforge.runtime.selfcheck import check_example

    c = check_example(ex, np.random.default_rng(1))
    assert c.ok, f"{c.name}: error {c.error:.2e} {c.detail}"
    for name, r in c.extra["resources"].items():
        assert r["local_bytes"] == 0, f"{name} spills to local memory: {r}"


def test_graph_replay_matches_and_follows_new_inputs():
    import torch
    from irforge.dialects.kernel import examples as E

    from irforge.runtime import Executor
    from irforge.runtime.selfcheck import lower

    ex = E.softmax(32, 1024, "f32", block=128)
    m = lower(ex.ir)
    plain, graphed = Executor(m), Executor(m, use_graph=True)
    for seed in (0, 1):
        (x,) = ex.make_inputs(np.random.default_rng(seed))
        a = plain(torch.from_numpy(x).cuda())[0].clone()
        b = graphed(torch.from_numpy(x).cuda())[0].clone()
        torch.testing.assert_close(a, b)
        torch.testing.assert_close(b, torch.softmax(torch.from_numpy(x).cuda(), -1), rtol=1e-5, atol=1e-6)


def test_params_are_bound_by_name():
    import torch

    from irforge.runtime import Executor
    from irforge.runtime.selfcheck import lower

    text = """kernel.func @k_scale(%x: !kernel.ptr<f32>, %w: !kernel.ptr<f32>, %y: !kernel.ptr<f32>) grid(2) block(64) {
  %t = kernel.thread_id x
  %b = kernel.block_id x
  %i = kernel.index %b * 64 + %t
  %a = kernel.load %x[%i] : f32
  %s = kernel.load %w[%i] : f32
  %p = kernel.mul %a, %s : f32
  kernel.store %p, %y[%i]
}
func.func @forward(%x: f32[128]) -> f32[128] {
  %w = kernel.param @scale : f32[128]
  %y = kernel.alloc : f32[128]
  kernel.launch @k_scale(%x, %w, %y)
  func.return %y
}
"""
    x = torch.randn(128, device="cuda")
    w = torch.randn(128, device="cuda")
    ex = Executor(lower(text), params={"scale": w})
    torch.testing.assert_close(ex(x)[0], x * w)
    ex.set_params({"scale": w * 2})
    torch.testing.assert_close(ex(x)[0], x * w * 2)


def test_dynamic_shared_memory_above_48kb():
    import torch

    from irforge.runtime import Executor
    from irforge.runtime.selfcheck import lower

    text = """kernel.func @k_big(%x: !kernel.ptr<f32>, %y: !kernel.ptr<f32>) grid(1) block(256) {
  %s = kernel.smem dynamic f32[24576]
  %t = kernel.thread_id x
  kernel.for %i in %t * 4 .. 24576 step 1024 {
    %v = kernel.load %x[%i] : f32[4]
    kernel.store %v, %s[%i]
  }
  kernel.barrier
  kernel.for %j in %t * 4 .. 24576 step 1024 {
    %v2 = kernel.load %s[24572 - %j] : f32[4]
    kernel.store %v2, %y[%j]
  }
}
func.func @forward(%x: f32[24576]) -> f32[24576] {
  %y = kernel.alloc : f32[24576]
  kernel.launch @k_big(%x, %y)
  func.return %y
}
"""
    x = torch.randn(24576, device="cuda")
    (y,) = Executor(lower(text))(x)
    expect = x.view(-1, 4).flip(0).reshape(-1)
    torch.testing.assert_close(y, expect)


def test_the_cubins_counts_are_the_drivers():
    """What the tuner prunes with (registers, stack frame, static shared memory read from the CUBIN) is what the
    driver reports for the loaded function, for kernels with and without static shared memory."""
    from irforge.dialects.cuda.ops import CudaKernelOp

    from irforge.runtime import Executor, nvrtc
    from irforge.runtime.selfcheck import lower

    checked = 0
    for ex in _examples():
        module = lower(ex.ir, f"{ex.name}.ir")
        driver = Executor(module).resources()
        for op in module.body.ops:
            if isinstance(op, CudaKernelOp):
                a = op.attributes
                got = nvrtc.resource_usage(a["source"], a["sym_name"])[a["sym_name"]]
                d = driver[a["sym_name"]]
                assert (got.registers, got.stack_frame, got.smem) == (
                    d["registers"], d["local_bytes"], d["static_smem"]
                ), (ex.name, got, d)  # fmt: skip
                checked += got.smem > 0
    assert checked, "no example has static shared memory"


def test_scalar_ops_match_the_simulator():
    from irforge.runtime.selfcheck import all_scalar_checks

    bad = [f"{c.name}: {c.error} {c.detail}" for c in all_scalar_checks() if not c.ok]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("name", ["reads", "pushes"])
def test_cluster_blocks_exchange_rows_through_distributed_shared_memory(name):
    """The kernel-level cluster programs of test_kernel_clusters on the GPU: blocks read each other's rows
    (`kernel.cluster_map`), or push theirs onto the others' mbarriers (`kernel.store_async`); the outputs are the
    simulator's, which are checked there against numpy."""
    from irforge.dialects.kernel.examples import Example
    from irforge.dialects.kernel.simulator import run
    from test_kernel_clusters import PUSH, _rotate

    from irforge.parser import parse_module
    from irforge.runtime.selfcheck import check_example

    ir = PUSH if name == "pushes" else _rotate(3, 4, 1)
    (expected,) = run(parse_module(ir))
    ex = Example(f"cluster_{name}", ir, lambda rng: [], lambda ins: [expected.astype(np.float64)], 1e-7, 0)
    c = check_example(ex, np.random.default_rng(1))
    assert c.ok, f"{c.name}: error {c.error:.2e} {c.detail}"
