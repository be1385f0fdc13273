"""The shared-memory passes (tile-tma, tile-pad-smem, tile-swizzle-smem) and the block-order and unrolling passes
(tile-rasterize, tile-unroll) on contractions: each keeps the answer through the kernel simulator (which executes
the padded and swizzled layouts, cp.async groups, TMA boxes and mbarrier phases), alone with any option and all
of them in any order; each is idempotent; the simulator reports a TMA stage read before its wait; the kernels
compile with NVRTC without spilling; and the models behind the choices count as worked out by hand."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from irforge.dialects import tile as T
from irforge.dialects.kernel import ops as K
from test_smem_banks import row_reads
from tilegen import assert_close, schedule_step

from irforge.diagnostics import IRForgeError
from irforge.instrumentation import Remarks
from irforge.interpreter import interpret
from irforge.parser import parse_module
from irforge.pass_manager import run_pipeline
from irforge.printer import print_module
from irforge.target import Target, use_target

SMEM_PASSES = {
    "tile-tma": ["", "{stages=all}", "{stages=none}"],
    "tile-pad-smem": ["", "{pad=0}", "{pad=4}", "{pad=8}"],
    "tile-swizzle-smem": ["", "{swizzle=0,0,0}", "{swizzle=1,2,3}", "{swizzle=2,2,4}"],
    "tile-rasterize": ["", "{rows=1}", "{rows=2}"],
    "tile-unroll": ["", "{max-ops=1}", "{max-ops=256}"],
}
# loop-to-tile up to the stages' copies: the shared-memory passes run after it, in any order.
PREFIX = (
    "map-to-tile,tile-cooperative-reduce,tile-blockify,tile-register-tile,tile-permute-lanes,tile-chunk-reduce,"
    "tile-vectorize,tile-stage-inputs"
)
LATER = {"tile-multi-buffer": ["", "{stages=2}"], "tile-async-copy": [""], "tile-pipeline": [""]}
SETTINGS = settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))


def contraction(m: int, n: int, k: int, transposed=False, prologue=False, epilogue=False) -> str:
    """y = f(x) @ w (+ bias), w stored [k, n] or [n, k]; f is silu with `prologue`."""
    w_type, w_sub = (f"f32[{n},{k}]", "%a1, %r") if transposed else (f"f32[{k},{n}]", "%r, %a1")
    pro = "%a2 = scalar.abs %a : f32"
    if prologue:
        pro = "%g = scalar.sigmoid %a : f32\n          %a2 = scalar.mul %a, %g : f32"
    bias = f", %bias: f32[{n}]" if epilogue else ""
    epi = "%o = scalar.neg %s : f32"
    if epilogue:
        epi = "%bv = loop.load %bias[%a1]\n        %o = scalar.add %s, %bv : f32"
    return f"""func.func @forward(%x: f32[{m},{k}], %w: {w_type}{bias}) -> f32[{m},{n}] {{
  %y = loop.buffer f32[{m},{n}]
  loop.kernel @k_mm {{
    loop.for %a0 in 0..{m} {{
      loop.for %a1 in 0..{n} {{
        %s = loop.reduce %r in 0..{k} add(0.0) -> f32 {{
          %a = loop.load %x[%a0, %r]
          {pro}
          %b = loop.load %w[{w_sub}]
          %p = scalar.mul %a2, %b : f32
          loop.yield %p
        }}
        {epi}
        loop.store %y[%a0, %a1] = %o
      }}
    }}
  }}
  func.return %y
}}
"""


@st.composite
def contractions(draw):
    m, n = draw(st.sampled_from([16, 32])), draw(st.sampled_from([16, 32, 64]))
    k = draw(st.sampled_from([16, 32]))
    return parse_module(contraction(m, n, k, draw(st.booleans()), draw(st.booleans()), draw(st.booleans())))


def _simulated(module, expected, what: str) -> None:
    assert_close(expected, interpret(module, seed=3), module, what)
    lowered = parse_module(print_module(module))
    run_pipeline(lowered, "tile-to-kernel")
    assert_close(expected, interpret(lowered, seed=3), lowered, f"{what}, simulated:\n{print_module(module)}")


@pytest.mark.parametrize("name", sorted(SMEM_PASSES))
@SETTINGS
@given(contractions(), st.data())
def test_each_pass_keeps_the_answer_and_is_idempotent(name, module, data):
    expected = interpret(module, seed=3)
    run_pipeline(module, PREFIX + ",tile-multi-buffer,tile-async-copy,tile-pipeline")
    text = name + data.draw(st.sampled_from(SMEM_PASSES[name]))
    assume(schedule_step(module, text) is None)
    once = print_module(module)
    run_pipeline(module, text)
    assert print_module(module) == once, f"{text} is not idempotent"
    _simulated(module, expected, text)


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(contractions(), st.data())
def test_the_stage_passes_in_any_order_keep_the_answer(module, data):
    expected = interpret(module, seed=3)
    run_pipeline(module, PREFIX)
    options = SMEM_PASSES | LATER
    order = data.draw(st.permutations(list(options)))
    texts = [p + data.draw(st.sampled_from(options[p])) for p in order]
    for text in texts:
        if schedule_step(module, text):
            return  # refused by its check
    _simulated(module, expected, ",".join(texts))


# ---- the tensor memory accelerator ----------------------------------------------------------------------------
def _tma_kernel(text: str, pipeline: str = "loop-to-tile,kernel(tile-tma{stages=all})"):
    m = parse_module(text)
    expected = interpret(m, seed=1)
    run_pipeline(m, pipeline)
    run_pipeline(m, "tile-to-kernel")
    return m, expected


def test_tma_stages_simulate_and_a_read_before_the_wait_is_reported():
    m, expected = _tma_kernel(contraction(32, 64, 32, transposed=True))
    assert [op.name for op in m.walk()].count("kernel.tma_load") >= 2
    assert_close(expected, interpret(m, seed=1), m, "tma")
    wait = next(op for op in m.walk() if isinstance(op, K.MbarrierWaitOp))
    wait.erase()
    with pytest.raises(IRForgeError, match="before the async copy into it completed"):
        interpret(m, seed=1)


def test_tma_parity_over_many_trips_of_a_ring():
    # 16 trips of K through a ring of 2 (prefetch 1): each mbarrier completes 8 phases, waited by parity.
    m, expected = _tma_kernel(
        contraction(16, 16, 128),
        PREFIX + ",kernel(tile-multi-buffer{stages=2},tile-tma{stages=all},tile-pipeline{depth=1})",
    )
    bars = [op.result.type for op in m.walk() if isinstance(op, K.SmemOp) and "mbarrier" in str(op.result.type)]
    assert bars and all(t.count == 2 for t in bars)
    assert_close(expected, interpret(m, seed=1), m, "tma ring of 2")


@SETTINGS
@given(st.sampled_from([(32, 64, 128), (64, 64, 64), (64, 32, 96)]), st.sampled_from([2, 3, 4]), st.booleans())
def test_a_producer_warp_copying_the_slabs_keeps_the_answer(shape, ring, transposed):
    """tile-warp-specialize{producer=on} on SIMT contractions whose slabs the copy engine copies into rings of 2 to
    4 along many trips: a warp added to the block requests each trip's slabs once their slot is released (empty
    mbarriers counting the block's threads), the block's threads wait for them (full mbarriers) and release each
    slot at the end of its trip; the simulator, running the warps until each blocks on its mbarrier, gives the loop
    interpreter's answer."""
    module = parse_module(contraction(*shape, transposed=transposed))
    expected = interpret(module, seed=3)
    run_pipeline(module, PREFIX + f",kernel(tile-multi-buffer{{stages={ring}}},tile-tma{{stages=all}},tile-pipeline)")
    threads = next(k for k in module.walk() if isinstance(k, T.KernelOp)).threads
    assert schedule_step(module, "tile-warp-specialize{producer=on}") is None
    produced = [op for op in module.walk() if isinstance(op, T.StageOp) and op.producer]
    assert produced and all(op.ring == ring and not op.prefetch for op in produced), print_module(module)
    _simulated(module, expected, f"producer warp, ring {ring}")
    run_pipeline(module, "tile-to-kernel")
    k = next(op for op in module.walk() if isinstance(op, K.KernelFuncOp))
    assert k.attributes["block"][0] == threads + 32


def test_a_slot_never_released_is_a_deadlock():
    m, _ = _tma_kernel(
        contraction(32, 64, 128),
        PREFIX + ",kernel(tile-multi-buffer{stages=2},tile-tma{stages=all},tile-warp-specialize{producer=on})",
    )
    release = [op for op in m.walk() if isinstance(op, K.MbarrierArriveOp) and "expect_tx" not in op.attributes]
    assert len(release) == 1
    release[0].erase()
    with pytest.raises(IRForgeError, match="deadlock: the mbarrier phase this warp waits for never completes"):
        interpret(m, seed=1)


ROW_SCALE = """func.func @forward(%x: f32[4,256]) -> f32[4,256] {
  %y = tile.buffer f32[4,256]
  tile.kernel @k grid(GRID) block(64) {
    tile.for %a in 0..4 by blockIdx.x {
      %x_smem = tile.stage %x[%a, 0] -> smem : f32[1,256]
      %p = tile.reduce %r in 0..256 by threadIdx.x vector 4 max(-inf) -> f32 {
        %v = tile.load %x_smem[0, %r]
        tile.yield %v
      }
      %mx = tile.combine max(%p) over threadIdx.x : f32
      tile.for %b in 0..256 by threadIdx.x vector 4 {
        %v = tile.load %x_smem[0, %b]
        %o = scalar.sub %v, %mx : f32
        tile.store %y[%a, %b] = %o
      }
    }
  }
  func.return %y
}
"""


def test_a_tma_stage_at_a_blocks_point_and_one_in_a_grid_strided_band():
    m = parse_module(ROW_SCALE.replace("GRID", "4"))
    expected = interpret(m, seed=2)
    run_pipeline(m, "kernel(tile-tma{stages=all})")
    assert "tma" in print_module(m)
    run_pipeline(m, "tile-to-kernel")
    assert_close(expected, interpret(m, seed=2), m, "tma at the band's point")
    # Two rows per block: the mbarrier's phases would have to carry across the band's trips, so the pass declines.
    m = parse_module(ROW_SCALE.replace("GRID", "2"))
    remarks = Remarks(["tile-tma"])
    run_pipeline(m, "kernel(tile-tma{stages=all})", instrumentations=[remarks])
    assert "tma" not in print_module(m) and "several trips" in remarks.records[0].message


def test_tma_needs_sm90():
    with use_target(Target(arch="sm_80")):
        m = parse_module(contraction(16, 16, 16))
        run_pipeline(m, "loop-to-tile")
        assert " tma" not in print_module(m)
        kernel = next(op for op in m.walk() if isinstance(op, T.KernelOp))
        from irforge.passes.tile.tma import TileTma

        assert "sm_80 has no tensor memory accelerator" in TileTma(stages="all").check(kernel)
        stage = next(op for op in m.walk() if isinstance(op, T.StageOp))
        stage.attributes["copy"] = "tma"
        with pytest.raises(IRForgeError, match="which sm_80 lacks"):
            run_pipeline(m, "tile-to-kernel")


# ---- the default schedule ---------------------------------------------------------------------------------------
def test_the_default_schedule_compiles_without_spills(tmp_path, monkeypatch):
    from irforge.runtime.nvrtc import compile_cuda

    monkeypatch.setenv("IRFORGE_CACHE_DIR", str(tmp_path))
    for transposed in (False, True):
        m = parse_module(contraction(512, 2048, 2048, transposed))
        run_pipeline(m, "loop-to-tile")
        text = print_module(m)
        assert " tma " in text and "unroll 0" in text and ("swizzle(" in text) == transposed
        run_pipeline(m, "tile-to-kernel,kernel-to-cuda")
        for k in [op for op in m.walk() if op.name == "cuda.kernel"]:  # the product, and a split-K zeroing kernel
            a = k.attributes
            opts = ["--ptxas-options=-v"]
            log = compile_cuda(a["source"], a["sym_name"], arch="sm_90a", options=opts, use_cache=False).log
            assert re.search(r"0 bytes spill stores, 0 bytes spill loads", log), log


def test_the_choices_are_remarks():
    remarks = Remarks(["tile-swizzle-smem", "tile-tma"])
    run_pipeline(parse_module(contraction(512, 512, 512, True)), "loop-to-tile", instrumentations=[remarks])
    said = {(r.pass_name, r.op.result.name_hint): r.message for r in remarks.records}
    assert said[("tile-tma", "x_smem")] == "%x_smem is copied by the tensor memory accelerator"
    assert said[("tile-tma", "w_smem")].startswith("%w_smem stays a copy by the threads")
    swizzled = said[("tile-swizzle-smem", "w_smem")]
    assert re.match(r"%w_smem \[64, 16\]: swizzle\(3, 2, 4\) \(4\.\d\d wavefronts per request", swizzled)


# ---- the block-order model ----------------------------------------------------------------------------------------
def _band(rows: int, cols: int) -> T.ForOp:
    text = f"""func.func @f(%x: f32[{rows * 8},64], %w: f32[64,{cols * 8}]) -> f32[{rows * 8},{cols * 8}] {{
  %y = tile.buffer f32[{rows * 8},{cols * 8}]
  tile.kernel @k grid({rows * cols}) block(64) {{
    tile.for %t0, %t1 in 0..{rows}, 0..{cols} by blockIdx.x {{
      tile.for %p0, %p1 in 0..8, 0..8 by threadIdx.x {{
        %s = tile.reduce %r in 0..64 add(0.0) -> f32 {{
          %a = tile.load %x[%t0 * 8 + %p0, %r]
          %b = tile.load %w[%r, %t1 * 8 + %p1]
          %p = scalar.mul %a, %b : f32
          tile.yield %p
        }}
        tile.store %y[%t0 * 8 + %p0, %t1 * 8 + %p1] = %s
      }}
    }}
  }}
  func.return %y
}}
"""
    return next(op for op in parse_module(text).walk() if isinstance(op, T.ForOp) and op.bind == ("blockIdx.x",))


def test_dram_bytes_of_grouped_block_orders():
    from irforge.passes.tile.rasterize import dram_bytes, operands

    # 8 x 8 blocks in waves of 8; an A-slab and a B-slab are 2048 bytes each (8 rows or columns of 64 f32). Row
    # order: a wave is one row, 1 A-slab and 8 B-slabs, 8 waves: 8 * 9. Groups of 2 rows: 2 x 4 blocks a wave,
    # 8 * 6; of 4: 4 x 2, 8 * 6; of 8: a column, 8 * 9.
    band = _band(8, 8)
    ops = operands(band)
    slab = 8 * 64 * 4
    got = [dram_bytes(band, ops, r, 8) for r in (1, 2, 4, 8)]
    assert got == [8 * 9 * slab, 8 * 6 * slab, 8 * 6 * slab, 8 * 9 * slab]


def test_rasterize_picks_the_fewest_dram_bytes_on_a_small_l2():
    from irforge.passes.tile.rasterize import choose

    band = _band(8, 8)
    kernel = T.kernel_of(band)
    with use_target(Target(sm_count=4, max_blocks_per_sm=2, l2_bytes=1024)):  # waves of 8, as above
        rows, why = choose(kernel, band)
    assert rows == 2 and "waves of 8 blocks" in why  # groups of 2 and of 4 tie: the smaller


def test_rasterized_blocks_keep_the_answer():
    m = parse_module(contraction(128, 256, 32))  # 2 x 4 blocks of 64 x 64
    expected = interpret(m, seed=3)
    run_pipeline(m, PREFIX + ",kernel(tile-rasterize{rows=2})")
    band = next(op for op in m.walk() if isinstance(op, T.ForOp) and op.bind == ("blockIdx.x",))
    assert band.attributes.get("raster") == 2
    _simulated(m, expected, "raster 2")


def test_the_heuristics_offer_the_candidates():
    from irforge.passes.tile import heuristics

    class OnlyPadEight(heuristics.Heuristic):
        def smem_pads(self, kernel, stage):
            return (8,)

    old = heuristics.set_heuristic(OnlyPadEight())
    try:
        m = parse_module(row_reads(32))
        run_pipeline(m, "kernel(tile-pad-smem)")
    finally:
        heuristics.set_heuristic(old)
    # tests/lit/tile-pad-smem/pad.ir: pad 4 is the best of all, but pad 8 (96 wavefronts) still beats none (288).
    assert next(op for op in m.walk() if isinstance(op, T.StageOp)).attributes["pad"] == 8


def test_vectors_in_a_swizzled_copy_stay_inside_a_unit():
    # Each thread reads 8 consecutive f32 (32 bytes): dense, one 32-byte access (two 16-byte pieces from one
    # address); swizzled by 16-byte units, two accesses, each inside its unit.
    text = row_reads(32, 8)
    m = parse_module(text)
    expected = interpret(m, seed=3)
    run_pipeline(m, "kernel(tile-swizzle-smem{swizzle=1,2,3})")
    _simulated(m, expected, "swizzle(1, 2, 3) under 32-byte reads")
    lowered = parse_module(print_module(m))
    run_pipeline(lowered, "tile-to-kernel")
    (load,) = [op for op in lowered.walk() if isinstance(op, K.LoadOp) and "smem" in str(op.operands[0].type)]
    assert load.attributes.get("vector") == 4


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from([16, 32, 64]), st.sampled_from([1, 2, 4]))
@example(32, 4)
def test_a_swizzle_tied_by_a_pad_is_left_to_the_pad_and_keeps_the_answer(cols, vector):
    # Thread t reads row t: rows of 64 to 256 bytes put a quarter warp's reads in few bank groups, which a swizzle
    # and a pad both spread. Where they tie (rows of 32 f32 read 16 bytes at a time: swizzle(3, 2, 3) and pad 4,
    # 4 wavefronts a request, tests/lit/tile-swizzle-smem/pad_ties.ir) the stage ends padded, not swizzled.
    m = parse_module(row_reads(cols, vector))
    expected = interpret(m, seed=3)
    run_pipeline(m, "kernel(tile-swizzle-smem,tile-pad-smem)")
    stage = next(op for op in m.walk() if isinstance(op, T.StageOp))
    if (cols, vector) == (32, 4):
        assert stage.attributes.get("pad") == 4 and "swizzle" not in stage.attributes
    _simulated(m, expected, f"row reads of {cols} f32, {vector} a trip: {print_module(m)}")
