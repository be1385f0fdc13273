"""Attention through the GPU levels on a CPU: one loop kernel (`loop-online-attention`), the tile schedule the
default passes give it (a thread's register tile spanning the head dimension, K/V chunks staged in a ring, the
Q tile staged once per block, GQA heads as rows, the keys split across blocks for decode), the tile interpreter
after each pass of `loop-to-tile` and the kernel simulator after `tile-to-kernel` against the loop interpreter,
and every kernel compiled by NVRTC for sm_90a without spills."""

from __future__ import annotations

import loopgen
import pytest
from irforge.dialects import tile as T
from irforge.dialects.cuda import ops as C
from irforge.dialects.kernel import ops as K
from irforge.dialects.loop import KernelOp as LoopKernel

from irforge.interpreter import interpret
from irforge.pass_manager import run_pipeline
from irforge.printer import print_module
from irforge.registry import registry
from irforge.testing import compare_outputs, output_types
from irforge.types import bf16

CASES = {
    # name: attention_module arguments
    "causal_gqa": dict(batch=1, kv_heads=2, group=2, queries=32, keys=32, e=8, ev=8, mask="causal"),
    "causal_odd": dict(batch=1, kv_heads=1, group=1, queries=7, keys=7, e=4, ev=4, mask="causal"),
    "bool_mask_rows_masked": dict(batch=2, kv_heads=1, group=1, queries=5, keys=48, e=4, ev=4, mask="bool"),
    "additive_mask_plain_softmax": dict(
        batch=1, kv_heads=1, group=1, queries=6, keys=16, e=8, ev=4, mask="add", safe=False, scale=0.5
    ),
    "decode_gqa_split": dict(batch=2, kv_heads=2, group=2, queries=1, keys=256, e=8, ev=8),
    "decode_below_one_chunk": dict(batch=1, kv_heads=1, group=3, queries=1, keys=5, e=4, ev=4),
    "decode_bf16": dict(batch=1, kv_heads=1, group=2, queries=1, keys=64, e=8, ev=8, dtype=bf16),
    "decode_split_11_ways": dict(batch=1, kv_heads=4, group=2, queries=1, keys=528, e=8, ev=8, dtype=bf16),
    # a head dimension past ROW_LANE_OUTPUTS: the default schedule shares each row among lanes
    "causal_head_dim_64_odd_keys": dict(batch=1, kv_heads=1, group=2, queries=5, keys=21, e=64, ev=64, mask="causal"),
}


def _passes(name: str) -> list[str]:
    text = registry().pipelines()[name].text
    lines = [ln.split("#")[0].strip() for ln in text.splitlines()]
    return [p.strip() for p in "".join(lines).split(",") if p.strip()]


def _matches(reference, module, what: str) -> None:
    got = interpret(module, seed=0)
    for i, c in enumerate(compare_outputs(got, reference, output_types(module))):
        assert c.ok, f"{what}: output #{i}: {c}"


@pytest.mark.parametrize("lanes", [0, 4], ids=["default", "lanes4"])
@pytest.mark.parametrize("name", list(CASES))
def test_attention_lowers_to_one_kernel_and_matches_at_every_step(name, lanes):
    """`lanes` 4 makes four threads share each row (a slice of its columns and of its scores' reduction each, the
    slices' sums combined over x) whatever the head dimension; the default schedule does where it is long."""
    m = loopgen.attention_module(**CASES[name])
    run_pipeline(m, "tensor-to-loop")
    assert len([op for op in m.walk() if isinstance(op, LoopKernel)]) == 1
    reference = interpret(m, seed=0)
    for p in _passes("loop-to-tile"):
        run_pipeline(m, f"{p}{{lanes={lanes}}}" if lanes and p == "tile-blockify" else p)
        _matches(reference, m, f"after {p}")
    if lanes:
        assert any(isinstance(c, T.CombineOp) and c.over == ("threadIdx.x",) for c in m.walk())
    _simulated_and_compiled(m, reference)


def _simulated_and_compiled(m, reference) -> None:
    from irforge.runtime.nvrtc import resource_usage

    run_pipeline(m, "tile-to-kernel")
    _matches(reference, m, "after tile-to-kernel (kernel simulator)")
    run_pipeline(m, "kernel-to-cuda")
    kernels = [op for op in m.body.ops if isinstance(op, C.CudaKernelOp)]
    source = "\n".join(k.attributes["source"] for k in kernels)
    usage = resource_usage(source, kernels[0].attributes["sym_name"], arch="sm_90a")
    assert set(usage) == {k.attributes["sym_name"] for k in kernels}
    assert not [n for n, u in usage.items() if u.spills], usage


def test_decode_group_of_three_on_whole_warps_of_lanes_matches():
    """A group of 3 query heads (too few for the atoms' top half, which takes 4 to 8) with rows of 64 takes 32 lanes
    a row (16 would leave its block of 48 threads a partial warp, which shuffles cannot serve); the keys split across
    blocks, each storing m and l once for its 32 lanes (one writer) and O by columns, the second kernel folding
    them: the simulator against the loop interpreter."""
    m = loopgen.attention_module(batch=1, kv_heads=1, group=3, queries=1, keys=128, e=64, ev=64, dtype=bf16)
    run_pipeline(m, "tensor-to-loop")
    reference = interpret(m, seed=0)
    run_pipeline(m, "loop-to-tile")
    _matches(reference, m, "after loop-to-tile")
    (k,) = [op for op in m.walk() if isinstance(op, T.KernelOp)]
    assert k.axis_size("threadIdx.x") == 32 and k.axis_size("threadIdx.y") == 3 and k.axis_size("blockIdx.y") > 1
    _simulated_and_compiled(m, reference)


def test_lanes_sharing_a_row_keep_it_under_a_forced_raster():
    """Decode attention at F4's head dimension with 2 lanes a row, which share each row's scores (a reduction over x
    combined over x), and a raster of 2 rows asked of tile-permute-lanes: points the tuner measured wrong on an H100
    (relative error 0.89), as the raster put a row's lanes on two rows. The raster is declined now; the simulator
    agrees with the loop interpreter."""
    from irforge.tune.space import set_tune

    m = loopgen.attention_module(batch=1, kv_heads=1, group=8, queries=1, keys=64, e=64, ev=64, dtype=bf16)
    run_pipeline(m, "tensor-to-loop")
    reference = interpret(m, seed=0)
    set_tune(m, {"tile-blockify": {"threads": 32, "bm": 8, "bn": 16, "lanes": 2}, "tile-permute-lanes": {"rows": 2}})
    run_pipeline(m, "loop-to-tile")
    _matches(reference, m, "after loop-to-tile")
    (lanes,) = [lp for lp in m.walk() if isinstance(lp, T.ForOp) and "threadIdx.x" in lp.bind]
    assert lanes.layout.raster == 1 and any(isinstance(c, T.CombineOp) and c.over == ("threadIdx.x",) for c in m.walk())
    _simulated_and_compiled(m, reference)


def _tile(**kw) -> T.KernelOp:
    m = loopgen.attention_module(**kw)
    run_pipeline(m, "tensor-to-loop,loop-to-tile")
    (k,) = [op for op in m.walk() if isinstance(op, T.KernelOp)]
    return k


def test_prefill_schedule_tiles_rows_over_threads_with_the_head_dimension_in_registers():
    """Each thread owns 4 of a query row's 64 columns of O, the row's lanes along x its 64 columns and the slices of
    its scores' reduction, combined over x (2 lanes for the registers, doubled to 16 while 512 rows times the lanes
    leave the GPU short of threads: ROW_FILL_THREADS_PER_SM); the K and V chunks of each trip are staged in a ring,
    the block's Q tile once, outside the loop over keys."""
    k = _tile(batch=1, kv_heads=2, group=2, queries=128, keys=128, e=64, ev=64, mask="causal")
    (threads,) = [lp for lp in k.walk() if isinstance(lp, T.ForOp) and "threadIdx.x" in lp.bind]
    assert threads.bind == ("threadIdx.y", "threadIdx.x") and k.axis_size("threadIdx.x") == 16
    assert threads.vector_shape[-1] == 4
    scores = [r for r in k.walk() if isinstance(r, T.ReduceOp) and r.bind == ("threadIdx.x",)]
    assert len(scores) == 1 and threads.is_ancestor_of(scores[0])
    stages = {s.operands[0].name_hint: s for s in k.walk() if isinstance(s, T.StageOp)}
    assert set(stages) == {"q", "k", "v"}
    assert stages["k"].ring > 1 and stages["v"].ring > 1 and stages["q"].ring == 1
    assert not any(isinstance(a, T.ReduceOp) for a in stages["q"].ancestors())
    assert isinstance(stages["k"].parent_op, T.ReduceOp) and stages["k"].box[-2] > 1  # a chunk of keys per trip


@pytest.mark.parametrize(
    ("kv_heads", "group", "queries", "e", "rows"),
    [
        # QW s512: 28 heads x 8 blocks of 64 rows = 224 blocks, 1.7 a multiprocessor; halved to 448, then 896 blocks
        # of 16 rows x 4 lanes (64 threads): 6.8 a multiprocessor
        (4, 7, 512, 128, 16),
        # TL s512: 32 heads x 8 = 256 blocks; 32 rows x 2 lanes: 512 blocks, 3.9 a multiprocessor (over 3.5)
        (4, 8, 512, 64, 32),
        # QW s128: 3584 rows take 8 lanes (4 x 3584 threads would underfill: ROW_FILL_THREADS_PER_SM); halved to 8
        # rows x 8 lanes (64 threads), 448 blocks, 3.4 a multiprocessor; 4 rows would leave 32 threads, under 64
        (4, 7, 128, 128, 8),
    ],
)
def test_causal_prefill_blocks_even_out_over_the_multiprocessors(kv_heads, group, queries, e, rows):
    """Prefill attention halves its row blocks, while they keep 64 threads, until there are 3.5 blocks a
    multiprocessor (causal blocks' costs differ: with one or two a multiprocessor the busiest sets the time); the
    block counts are worked out by hand for an H100's 132 multiprocessors."""
    k = _tile(batch=1, kv_heads=kv_heads, group=group, queries=queries, keys=queries, e=e, ev=e, mask="causal")
    assert k.axis_size("threadIdx.y") == rows, print_module(k)


def _usage(m):
    from irforge.runtime.nvrtc import resource_usage

    run_pipeline(m, "tile-to-kernel,kernel-to-cuda")
    kernels = [op for op in m.body.ops if isinstance(op, C.CudaKernelOp)]
    source = "\n".join(k.attributes["source"] for k in kernels)
    return resource_usage(source, kernels[0].attributes["sym_name"], arch="sm_90a")


@pytest.mark.parametrize("group,queries,lanes", [(7, 128, 8), (7, 512, 4), (1, 32, 16)])
def test_head_dimension_128_in_f32_shares_rows_and_does_not_spill(group, queries, lanes):
    """Qwen2.5-7B's attention in f32 (head dimension 128): a thread per row would hold 128 accumulators of O beside
    its 128 values of Q and spill. Four lanes a row hold 32 columns and a 32-long slice of the scores' reduction
    each, more where the rows alone underfill the GPU (3584 rows: 8 lanes, 128 rows: 16; 14336 keep 4); the blocks
    fill the multiprocessors (down to a warp a block); NVRTC compiles every kernel without spills."""
    from irforge.target import target

    m = loopgen.attention_module(batch=1, kv_heads=4, group=group, queries=queries, keys=queries, e=128, ev=128,
                                 mask="causal")  # fmt: skip
    run_pipeline(m, "tensor-to-loop,loop-to-tile")
    (k,) = [op for op in m.walk() if isinstance(op, T.KernelOp)]
    assert k.axis_size("threadIdx.x") == lanes and k.threads % target().warp_size == 0
    (threads,) = [lp for lp in k.walk() if isinstance(lp, T.ForOp) and "threadIdx.x" in lp.bind]
    assert threads.vector_shape[-1] == 128 // lanes
    blocks = k.axis_size("blockIdx.x") * k.axis_size("blockIdx.y")
    assert blocks >= target().sm_count or k.threads == target().warp_size  # or blocks of one warp already
    usage = _usage(m)
    assert not [n for n, u in usage.items() if u.spills or u.stack_frame], usage


def test_decode_schedule_shares_kv_among_a_group_and_splits_the_keys():
    """One query row per head: the group's heads are the rows of a block, reading each K/V chunk once, each row's
    lanes holding 4 columns at most (DECODE_LANE_OUTPUTS), then more to fill a warp (4 rows x 8 lanes of 2); the
    keys are split across blocks whose partial (m, l, O) carriers the online combine joins."""
    k = _tile(batch=1, kv_heads=2, group=4, queries=1, keys=1024, e=16, ev=16)
    (threads,) = [lp for lp in k.walk() if isinstance(lp, T.ForOp) and "threadIdx.x" in lp.bind]
    assert threads.extents == (4, 16) and k.axis_size("threadIdx.x") == 8 and threads.vector_shape[-1] == 2
    assert any(isinstance(c, T.CombineOp) and c.over == ("blockIdx.y",) for c in k.walk())


def test_decode_of_a_group_of_8_heads_runs_on_one_warps_atoms_and_splits_the_cache():
    """TinyLlama's decode over a cache of 528 (33 chunks of 16 keys: 3 x 11, no count of SPLITS but 3 divides it):
    the 8 query heads of a KV head at one position are one warp's rows on the mma atoms' top halves (a block of
    32 threads, 4 blocks), K and V staged 16 keys a chunk (528 has no larger power-of-two divisor), and the cache
    split toward DECODE_MMA_BLOCKS_PER_SM blocks a multiprocessor as far as shares of ATTENTION_MIN_SHARE chunks
    allow, over any divisor of the chunks: 11 a block."""
    from irforge.passes.tile.heuristics import ATTENTION_MIN_SHARE

    from irforge.target import target

    assert target().sm_count == 132 and 33 // 11 >= ATTENTION_MIN_SHARE
    k = _tile(batch=1, kv_heads=4, group=8, queries=1, keys=528, e=64, ev=64, dtype=bf16)
    (loop,) = [lp for lp in k.walk() if isinstance(lp, T.ForOp) and "atom" in lp.attributes]
    assert loop.extents == (8, 64) and loop.attributes["warps"] == (1, 1)
    stages = {s.operands[0].name_hint: s for s in k.walk() if isinstance(s, T.StageOp)}
    assert stages["k"].box[-2] == 16
    assert k.axis_size("blockIdx.y") == 11 and k.axis_size("blockIdx.x") == 4
    assert (k.axis_size("threadIdx.x"), k.axis_size("threadIdx.y")) == (32, 1)


@pytest.mark.parametrize("batch,group,e", [(1, 3, 128), (32, 3, 128)])
def test_decode_fills_the_multiprocessors_with_warps_of_whole_lanes(batch, group, e):
    """The llm suite's decode shapes with groups of 3 heads (bf16, a 2048-long KV cache, 4 key/value heads; groups
    of 4 to 8 run on the atoms instead): the group's query heads are a block's rows (each K/V chunk read once for
    them), 4 columns a lane for one sequence, 8 for a batch
    whose rows keep every multiprocessor busy (fewer shuffle rounds a score), the lanes whole warps (the scores'
    shuffles need them), K and V copied by the tensor memory accelerator (whole 16-byte rows) into rings of
    DECODE_RING where the blocks are many (RING for one sequence), and the keys split until there are about
    ATTENTION_DECODE_BLOCKS_PER_SM blocks a multiprocessor, or as far as shares of two chunks allow; no kernel
    spills."""
    from irforge.passes.tile.heuristics import (
        ATTENTION_DECODE_BLOCKS_PER_SM,
        ATTENTION_MIN_SHARE,
        DECODE_BUSY_LANE_OUTPUTS,
        DECODE_LANE_OUTPUTS,
        DECODE_RING,
        DECODE_RING_BLOCKS_PER_SM,
        RING,
    )

    from irforge.target import target

    m = loopgen.attention_module(batch=batch, kv_heads=4, group=group, queries=1, keys=2048, e=e, ev=e, dtype=bf16)
    run_pipeline(m, "tensor-to-loop,loop-to-tile")
    (k,) = [op for op in m.walk() if isinstance(op, T.KernelOp)]
    (threads,) = [lp for lp in k.walk() if isinstance(lp, T.ForOp) and "threadIdx.x" in lp.bind]
    rows, lanes = k.axis_size("threadIdx.y"), k.axis_size("threadIdx.x")
    assert threads.extents[0] == rows and group % rows == 0
    assert e // lanes == (DECODE_BUSY_LANE_OUTPUTS if batch == 32 and e == 64 else DECODE_LANE_OUTPUTS)
    assert e == 64 or rows == group
    assert k.threads % target().warp_size == 0
    stages = {s.operands[0].name_hint: s for s in k.walk() if isinstance(s, T.StageOp)}
    assert stages["k"].attributes.get("copy") == "tma" and stages["v"].attributes.get("copy") == "tma"
    splits = k.axis_size("blockIdx.y")
    blocks = k.axis_size("blockIdx.x") * splits
    ring = DECODE_RING if blocks >= DECODE_RING_BLOCKS_PER_SM * target().sm_count else RING
    assert stages["k"].ring == stages["v"].ring == ring
    aim = ATTENTION_DECODE_BLOCKS_PER_SM * target().sm_count
    shortest = 2048 // splits == ATTENTION_MIN_SHARE * stages["k"].box[-2]  # as many splits as the shares allow
    assert splits > 1 and (aim / 2 <= blocks <= 2 * aim or shortest), (splits, blocks)
    usage = _usage(m)
    assert not [n for n, u in usage.items() if u.spills or u.stack_frame], usage


@pytest.mark.parametrize(
    "kw",
    [
        dict(batch=1, kv_heads=4, group=7, queries=128, keys=128, e=128, ev=128, mask="causal"),
        dict(batch=1, kv_heads=4, group=3, queries=1, keys=2048, e=128, ev=128, dtype=bf16),
    ],
    ids=["prefill_causal", "decode"],
)
def test_each_chunk_of_keys_rescales_the_carrier_once(kw):
    """The default schedules fold each chunk of keys key first (keyed.py): the kernel over the keys computes one
    exponential per key of a chunk and one for the carrier's rescale, straight-line, where folding key by key
    computes two in the chunk's loop (once each in the IR)."""
    m = loopgen.attention_module(**kw)
    run_pipeline(m, "tensor-to-loop,loop-to-tile")
    (k,) = [op for op in m.walk() if isinstance(op, T.KernelOp)]
    chunk = next(s for s in k.walk() if isinstance(s, T.StageOp) and s.operands[0].name_hint == "k").box[-2]
    run_pipeline(m, "tile-to-kernel")
    func = next(f for f in m.walk() if isinstance(f, K.KernelFuncOp))
    exps = [op for op in func.walk() if isinstance(op, K.ScalarMathOp) and op.scalar_op == "exp_flush"]
    assert chunk > 1 and len(exps) == chunk + 1
