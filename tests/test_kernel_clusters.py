"""Thread block clusters at the kernel level: `cluster(...)` on a kernel.func, `kernel.cluster_barrier`,
`kernel.cluster_map` (another block's shared buffer) and `kernel.store_async` (a store into another block's shared
memory that completes on its mbarrier) parse, print and verify; the simulator runs a cluster's blocks together and
catches the mistakes distributed shared memory invites; the CUDA emitter declares the cluster and NVRTC compiles
it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from irforge.dialects.kernel.simulator import run

from irforge.diagnostics import IRForgeError
from irforge.parser import parse_module
from irforge.printer import print_module


def _rotate(blocks: int, ranks: int, shift: int, *, first=True, second=True, guard="") -> str:
    """Each block of a cluster of `ranks` along y publishes its thread ids (plus 100 times its rank) in shared
    memory and reads those of the block `shift` ranks further; `first`/`second`: the cluster barriers before and
    after the remote read; `guard`: lines defining %g, a condition only the threads meeting it reach the first
    barrier under."""
    barrier = "kernel.cluster_barrier"
    first_barrier = barrier if not guard else f"{guard}\n  kernel.if %g {{\n    {barrier}\n  }}"
    return f"""kernel.func @k(%out: !kernel.ptr<f32>) grid({blocks}, {ranks}) block(64) cluster(1, {ranks}) {{
  %t = kernel.thread_id x
  %b = kernel.block_id y
  %buf = kernel.smem f32[64]
  %v = kernel.cast %t : index to f32
  %bf = kernel.cast %b : index to f32
  %h = kernel.const 100.0 : f32
  %hb = kernel.mul %bf, %h : f32
  %w = kernel.add %v, %hb : f32
  kernel.store %w, %buf[%t]
  {first_barrier if first else ""}
  %r = kernel.cluster_map %buf, rank (%b + {shift}) mod {ranks}
  %x = kernel.load %r[%t] : f32
  {barrier if second else ""}
  %bx = kernel.block_id x
  kernel.store %x, %out[(%bx * {ranks} + %b) * 64 + %t]
}}
func.func @forward() -> f32[{blocks * ranks * 64}] {{
  %o = kernel.alloc : f32[{blocks * ranks * 64}]
  kernel.launch @k(%o)
  func.return %o
}}
"""


@settings(max_examples=8, deadline=None)
@given(blocks=st.integers(1, 3), ranks=st.sampled_from([2, 4, 8]), shift=st.integers(0, 7))
def test_blocks_read_each_others_shared_memory(blocks, ranks, shift):
    m = parse_module(_rotate(blocks, ranks, shift))
    assert parse_module(print_module(m)) is not None and "cluster(1, " in print_module(m)
    (out,) = run(m)
    t = np.arange(64)
    expected = [t + 100 * ((b + shift) % ranks) for _ in range(blocks) for b in range(ranks)]
    np.testing.assert_array_equal(out, np.concatenate(expected))


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(first=False), "which nothing has written yet"),
        (dict(second=False), "which has exited"),
        (
            dict(guard="%c16 = kernel.const 16 : index\n  %g = kernel.lt %t, %c16 : bool"),
            "cluster barrier reached by only part of the warp",
        ),
    ],
    ids=["no-barrier-before-the-read", "no-barrier-after-the-read", "barrier-in-divergent-code"],
)
def test_the_simulator_catches_cluster_mistakes(kw, message):
    with pytest.raises(IRForgeError, match=message):
        run(parse_module(_rotate(1, 4, 1, **kw)))


def test_a_remote_read_of_a_write_after_the_barrier_is_a_race():
    text = _rotate(1, 2, 1).replace(
        "  %r = kernel.cluster_map",
        "  %w2 = kernel.add %w, %h : f32\n  kernel.store %w2, %buf[%t]\n  %r = kernel.cluster_map",
    )
    with pytest.raises(IRForgeError, match="race"):
        run(parse_module(text))


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("grid(1, 4)", "grid(1, 6)", r"grid \[1, 6, 1\] is no multiple of its cluster \[1, 4, 1\]"),
        ("grid(1, 4) block(64) cluster(1, 4)", "grid(1, 16) block(64) cluster(1, 16)", "portable limit is 8"),
        (" cluster(1, 4)", "", "needs a kernel launched in clusters"),
        ("kernel.cluster_map %buf,", "kernel.cluster_map %out,", "maps a shared buffer"),
    ],
    ids=["grid", "size", "no-cluster", "not-shared"],
)
def test_the_verifier_refuses_bad_clusters(old, new, message):
    text = _rotate(1, 4, 1)
    assert old in text
    with pytest.raises(IRForgeError, match=message):
        parse_module(text.replace(old, new))


def test_the_cuda_kernel_declares_its_cluster_and_compiles():
    from irforge.dialects.cuda import ops as C

    from irforge.pass_manager import run_pipeline
    from irforge.runtime.nvrtc import resource_usage

    m = parse_module(_rotate(2, 4, 1))
    run_pipeline(m, "kernel-to-cuda")
    (k,) = [op for op in m.body.ops if isinstance(op, C.CudaKernelOp)]
    src = k.attributes["source"]
    assert "__cluster_dims__(1, 4, 1)" in src and src.count("irf_cluster_sync();") == 2
    assert "irf_cluster_map(buf, (b + 1) % 4)" in src
    usage = resource_usage(src, k.attributes["sym_name"], arch="sm_90a")
    assert usage and not any(u.spills for u in usage.values()), usage


# Every block of a cluster of 4 along y writes t + b (t: its thread, b: its rank) into its slot of a [4, 64, 4]
# buffer and pushes it into the same slot of the 3 others; each then sums the 4 slots: 4 t + 6 in every block.
PUSH = """kernel.func @k(%out: !kernel.ptr<f32>) grid(2, 4) block(64) cluster(1, 4) {
  %rows = kernel.smem f32[4,64,4]
  %bar = kernel.smem mbarrier[1]
  %t = kernel.thread_id x
  %b = kernel.block_id y
  %z = kernel.const 0 : index
  %first = kernel.eq %t, %z : bool
  kernel.if %first {
    kernel.mbarrier_init %bar[0], 1
  }
  kernel.cluster_barrier
  %v = kernel.cast %t : index to f32
  %bf = kernel.cast %b : index to f32
  %w = kernel.add %v, %bf : f32
  %tile = kernel.splat %w : f32[4]
  kernel.store %tile, %rows[%b, %t, 0]
  kernel.for %j in 1 .. 4 attributes {unroll = 0} {
    kernel.store_async %tile, %rows[%b, %t, 0], %bar[0], rank (%b + %j) mod 4
  }
  kernel.if %first {
    kernel.mbarrier_arrive %bar[0] expect_tx 3072
  }
  kernel.mbarrier_wait %bar[0], parity 0
  %s0 = kernel.const 0.0 : f32[4]
  %s = kernel.for %r in 0 .. 4 carry(%acc <- %s0 : f32[4]) attributes {unroll = 0} {
    %x = kernel.load %rows[%r, %t, 0] : f32[4]
    %y = kernel.add %acc, %x : f32[4]
    kernel.yield %y
  }
  %bx = kernel.block_id x
  %e = kernel.extract %s[0] : f32
  kernel.store %e, %out[(%bx * 4 + %b) * 64 + %t]
}
func.func @forward() -> f32[512] {
  %o = kernel.alloc : f32[512]
  kernel.launch @k(%o)
  func.return %o
}
"""


def test_blocks_push_their_rows_into_each_other():
    m = parse_module(PUSH)
    assert parse_module(print_module(m)) is not None
    (out,) = run(m)
    np.testing.assert_array_equal(out, np.tile(4 * np.arange(64) + 6, 8))


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("  kernel.mbarrier_wait %bar[0], parity 0\n", "", "before the async copy into it completed"),
        ("  kernel.cluster_barrier\n", "", "not initialised yet"),
        ("expect_tx 3072", "expect_tx 2048", "before the async copy into it completed"),
    ],
    ids=["no-wait", "no-barrier-after-the-init", "too-few-bytes-announced"],
)
def test_the_simulator_catches_push_mistakes(old, new, message):
    assert old in PUSH
    with pytest.raises(IRForgeError, match=message):
        run(parse_module(PUSH.replace(old, new)))


def test_a_store_async_moves_32_bit_elements_into_a_shared_buffer():
    def kernel(dtype: str, bar: str) -> str:
        return f"""kernel.func @k() grid(1, 2) block(32) cluster(1, 2) {{
  %rows = kernel.smem {dtype}[2,32]
  %bar = kernel.smem mbarrier[1]
  %t = kernel.thread_id x
  %v = kernel.cast %t : index to {dtype}
  kernel.store_async %v, %rows[1, %t], {bar}[0], rank 1
}}
"""

    assert parse_module(kernel("f32", "%bar")) is not None
    with pytest.raises(IRForgeError, match="32-bit elements"):
        parse_module(kernel("bf16", "%bar"))
    with pytest.raises(IRForgeError, match="completes on an mbarrier array"):
        parse_module(kernel("f32", "%rows"))


def test_a_pushing_kernel_compiles():
    from irforge.dialects.cuda import ops as C

    from irforge.pass_manager import run_pipeline
    from irforge.runtime.nvrtc import resource_usage

    m = parse_module(PUSH)
    run_pipeline(m, "kernel-to-cuda")
    (k,) = [op for op in m.body.ops if isinstance(op, C.CudaKernelOp)]
    src = k.attributes["source"]
    assert "irf_st_async<4>(irf_dst, tile, irf_bar);" in src and "irf_mapa_shared(rows_addr" in src
    usage = resource_usage(src, k.attributes["sym_name"], arch="sm_90a")
    assert usage and not any(u.spills for u in usage.values()), usage


def test_a_split_through_a_cluster_leaves_its_carriers_room():
    """L1 (a [512, 2048] x [2048, 2560] bf16 linear on wgmma, 64 x 160 tiles a block) split over 4 blocks of a
    cluster in rings of 3: each block keeps the 4 blocks' 80 accumulators a thread (160 KB), which the stages'
    budget now counts, so the kernel's dynamic and static shared memory (read from the CUBIN) fit a block; it
    lowered to 225,280 bytes of stages and carriers and 26,624 static, over the 232,448 a block has, and failed
    only at launch."""
    from irforge.dialects.cuda import ops as C

    from irforge import frontend
    from irforge.compiler import compile_program
    from irforge.pass_manager import run_pipeline
    from irforge.runtime.nvrtc import resource_usage
    from irforge.target import target
    from irforge.tune.space import set_tune

    snippet = (
        "import torch.nn.functional as F; "
        "F.linear(torch.randn(512, 2048, dtype=torch.bfloat16), torch.randn(2560, 2048, dtype=torch.bfloat16))"
    )
    m = compile_program(frontend.from_snippet(snippet), "loop").module
    set_tune(m, {"tile-split-reduce": {"splits": 4, "via": "cluster"}, "tile-multi-buffer": {"stages": 3}})
    run_pipeline(m, "loop-to-tile,tile-to-kernel,kernel-to-cuda")
    (k,) = [op for op in m.body.ops if isinstance(op, C.CudaKernelOp)]
    assert "__cluster_dims__" in k.attributes["source"]
    name = k.attributes["sym_name"]
    static = resource_usage(k.attributes["source"], name, arch="sm_90a")[name].smem
    assert k.attributes["smem"] + static <= target().smem_per_block, (k.attributes["smem"], static)
