"""tile-persistent: resident blocks walking a contraction's tiles keep the answer (the tile interpreter before and
after the pass; the kernel simulator running the producer warp's rings across tiles, their mbarrier phases going on
from one tile to the next), take the grid the GPU holds, and the pass declines what it cannot take."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from irforge.dialects import tile as T
from irforge.passes.tile.persistent import persistent_band
from test_tensor_cores import _linear
from tilegen import assert_close, schedule, schedule_step

from irforge.interpreter import interpret
from irforge.parser import parse_module
from irforge.pass_manager import run_pipeline
from irforge.printer import print_module
from irforge.target import target, use_target


def _produced_linear(m, n, k, dtype, bn, ring, atom="wgmma"):
    """nn.Linear's product in tiles of 64 x `bn`, its K in chunks of 32 whose slabs a producer warp copies into rings
    of `ring` slots with the tensor memory accelerator."""
    module = parse_module(_linear(m, n, k, dtype, bias=False))
    passes = [
        f"tile-blockify{{bm=64 bn={bn} threads=128}}",
        f"tile-tensorize{{atom={atom}}}",
        "tile-chunk-reduce{bk=32}",
        "tile-stage-inputs",
        f"tile-multi-buffer{{stages={ring}}}",
        "tile-tma{stages=all}",
        "tile-warp-specialize{producer=on}",
        "tile-swizzle-smem",
    ]
    return module, passes


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from((64, 128)),
    st.sampled_from((32, 64)),
    st.sampled_from((64, 128)),
    st.sampled_from(("bf16", "f16")),
    st.sampled_from((2, 3, 4)),
    st.sampled_from((1, 2, 3)),
    st.sampled_from(("wgmma", "mma")),
)
def test_resident_blocks_walking_the_tiles_keep_the_answer(m, n, k, dtype, ring, sms, atom):
    """On a GPU of `sms` multiprocessors (fewer than the product's tiles of 64 x 16), each block walks several
    tiles; the producer warp's slots go on counting their phases from one tile into the next."""
    assume((m // 64) * (n // 16) > sms)
    module, passes = _produced_linear(m, n, k, dtype, 16, ring, atom)
    expected = interpret(module, seed=7)
    with use_target(replace(target(), sm_count=sms, max_blocks_per_sm=1)):
        assert schedule(module, passes) is None
        assert any(isinstance(s, T.StageOp) and s.producer for s in module.walk()), print_module(module)
        assert_close(expected, interpret(module, seed=7), module, "before tile-persistent")
        assert schedule_step(module, "tile-persistent{blocks=on}") is None
        text = print_module(module)
        (kernel,) = [op for op in module.walk() if isinstance(op, T.KernelOp)]
        tiles = (m // 64) * (n // 16)
        assert kernel.attributes["grid"] == (sms, 1, 1), text
        (band,) = [lp for lp in kernel.walk() if isinstance(lp, T.ForOp) and lp.bind == ("blockIdx.x",)]
        assert band.work_items == tiles and band.attributes["unroll"] == 1, text
        assert_close(expected, interpret(module, seed=7), module, f"tile, after tile-persistent:\n{text}")
        run_pipeline(module, "tile-to-kernel")
        assert_close(expected, interpret(module, seed=7), module, f"kernel, {sms} blocks:\n{text}")


def test_the_grid_is_what_the_gpu_holds_at_once():
    """132 multiprocessors, one block each (the producer warpgroup shares the register file out): a product of 1024
    tiles takes 132 blocks; one of 128 tiles (fewer than fit) keeps its grid, and says why."""
    module, passes = _produced_linear(2048, 4096, 128, "bf16", 32, 4)
    passes[0] = "tile-blockify{bm=128 bn=64 threads=256}"
    assert schedule(module, passes) is None
    assert schedule_step(module, "tile-persistent{blocks=on}") is None
    (kernel,) = [op for op in module.walk() if isinstance(op, T.KernelOp)]
    assert kernel.attributes["grid"] == (target().sm_count, 1, 1), print_module(module)

    small, passes = _produced_linear(1024, 1024, 128, "bf16", 32, 4)
    passes[0] = "tile-blockify{bm=128 bn=64 threads=256}"
    assert schedule(small, passes) is None
    (kernel,) = [op for op in small.walk() if isinstance(op, T.KernelOp)]
    band, why = persistent_band(kernel)
    assert band is None and why == "its 128 tiles fit on the GPU at once"
    assert schedule_step(small, "tile-persistent{blocks=on}") is None
    assert kernel.attributes["grid"] == (128, 1, 1)


def test_rings_the_block_fills_keep_their_grid():
    """Slabs the block's own threads copy (no producer warp) count their ring's phases within one tile: declined."""
    module, passes = _produced_linear(128, 64, 64, "bf16", 16, 2)
    passes = [p for p in passes if not p.startswith("tile-warp-specialize")]
    with use_target(replace(target(), sm_count=1, max_blocks_per_sm=1)):
        assert schedule(module, passes) is None
        (kernel,) = [op for op in module.walk() if isinstance(op, T.KernelOp)]
        band, why = persistent_band(kernel)
        assert band is None and "counts its phases within one tile" in why
        before = print_module(module)
        assert schedule_step(module, "tile-persistent{blocks=on}") is None
        assert print_module(module) == before
