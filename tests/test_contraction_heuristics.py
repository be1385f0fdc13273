"""The SIMT contraction defaults for a long K (passes/tile/heuristics.py), counted by hand on an H100 (132
multiprocessors): a long K over too few output tiles takes narrower tiles of more threads, so the deepest split fills
the multiprocessors (`contraction_tile`); a long K over a few blocks a multiprocessor splits deeper, as far as shares
keep 32 chunks and the blocks fit one wave, or 64 chunks and two waves (`reduce_splits`). Each schedule keeps the
answer (the kernel simulator against the loop interpreter) and compiles without spilling."""

from __future__ import annotations

import pytest
from irforge.dialects import tile as T
from test_tile_smem_passes import contraction
from tilegen import assert_close

from irforge.interpreter import interpret
from irforge.parser import parse_module
from irforge.pass_manager import run_pipeline
from irforge.printer import print_module


def _schedule(m: int, n: int, k: int):
    module = parse_module(contraction(m, n, k))
    run_pipeline(module, "loop-to-tile")
    (kernel,) = [op for op in module.walk() if isinstance(op, T.KernelOp)]
    threads = next(op for op in kernel.walk() if isinstance(op, T.ForOp) and "threadIdx.x" in op.bind)
    split = [r.extents[0] for r in kernel.walk() if isinstance(r, T.ReduceOp) and "blockIdx.y" in r.bind]
    return module, tuple(threads.extents), kernel.threads, split


@pytest.mark.parametrize(
    ("shape", "tile", "threads", "split"),
    [
        # 32 x 512, K = 3584 (224 chunks of 16, 16 ways at most): 32 x 128 tiles are 4, 64 blocks; 16 x 128 are 8,
        # 128 blocks; 8 x 128 are 16, 256 blocks; 1024 outputs over 4 a thread: 256 threads
        ((32, 512, 3584), (8, 128), 256, [16]),
        # 32 x 256, K = 2048 (128 chunks, 16 ways): 8 x 128 is as narrow as tiles go: 8 tiles, 128 blocks
        ((32, 256, 2048), (8, 128), 256, [16]),
        # 128 x 2048, K = 2048: 64 tiles of 64 x 64 fill the GPU at 16 ways; shares of 32 chunks allow 4
        ((128, 2048, 2048), (64, 64), 64, [4]),
        # K = 5632 (352 chunks): shares of 32 chunks allow up to 11 ways, 64 tiles x 8 = 512 blocks fit a wave of
        # 8 blocks of 64 threads (128 registers) a multiprocessor: 8 ways
        ((128, 2048, 5632), (64, 64), 64, [8]),
        # 512 x 2048, K = 5632: 256 tiles x 8 would be 2048 blocks, two waves: 4 ways
        ((512, 2048, 5632), (64, 64), 64, [4]),
        # 128 x 3584, K = 18944 (1184 chunks): 112 tiles x 16 = 1792 blocks, under two waves (2112), shares of 74
        # chunks (over 64): 16 ways
        ((128, 3584, 18944), (64, 64), 64, [16]),
    ],
)
def test_long_k_schedules(shape, tile, threads, split):
    _, got_tile, got_threads, got_split = _schedule(*shape)
    assert (got_tile, got_threads, got_split) == (tile, threads, split)


def test_a_tile_narrowed_to_fill_keeps_the_answer_and_compiles_without_spills():
    """16 x 128, K = 512 (32 chunks: 4 ways at most): one 16 x 128 tile, then 8 x 128 tiles of 256 threads."""
    from test_reach_cuda import _assert_no_spills, _compiled

    module, tile, threads, split = _schedule(16, 128, 512)
    assert (tile, threads, split) == ((8, 128), 256, [4])
    expected = interpret(parse_module(contraction(16, 128, 512)), seed=3)
    lowered = parse_module(print_module(module))
    run_pipeline(lowered, "tile-to-kernel")
    assert_close(expected, interpret(lowered, seed=3), lowered, "8 x 128 tiles of 256 threads, split 4")
    _assert_no_spills(_compiled(module))


@pytest.mark.parametrize("m", [1, 3, 4, 7, 8])
def test_eight_rows_or_fewer_take_one_block_of_several_warps(m):
    """m <= 8 rows (a decode step of a few sequences) over 128 columns, K = 256: a block takes all m rows x 128
    columns, 4 outputs a thread (m x 32 threads), where 8 x 8 register tiles made blocks of 16 threads (8 rows) or 2
    (fewer); the kernel simulator gives the loop interpreter's answer."""
    module, tile, threads, _ = _schedule(m, 128, 256)
    assert (tile, threads) == (((m, 128) if m > 1 else (128,)), m * 32)  # a unit row dimension is no loop
    expected = interpret(parse_module(contraction(m, 128, 256)), seed=4)
    lowered = parse_module(print_module(module))
    run_pipeline(lowered, "tile-to-kernel")
    assert_close(expected, interpret(lowered, seed=4), lowered, f"{m} x 128 tiles of {m * 32} threads")
