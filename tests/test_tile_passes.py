"""The tile passes: every schedule keeps the answer (the tile interpreter against the loop interpreter, random
programs and random schedules in any order), each pass is idempotent, refuses what it must with a located message,
reads per-kernel `tune` overrides, and the defaults come from one replaceable heuristic."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from irforge.dialects import tile as T
from loopgen import attention_module, contraction_programs
from tilegen import (
    CONTRACTION_OPTIONS,
    CONTRACTION_PASSES,
    SCHEDULE_OPTIONS,
    assert_close,
    in_order,
    loop_programs,
    runs_somewhere,
    schedule,
    schedule_step,
    schedules,
)

from irforge.diagnostics import IRForgeError
from irforge.interpreter import interpret
from irforge.parser import parse_module
from irforge.pass_manager import run_pipeline
from irforge.pipeline import module_level
from irforge.printer import print_module

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(loop_programs(), schedules())
def test_any_schedule_keeps_the_answer(module, passes):
    assume(runs_somewhere(module))
    expected = interpret(module, seed=2)
    refused = schedule(module, passes)
    assume(refused is None)
    assert module_level(module) == "tile"
    assert_close(expected, interpret(module, seed=2), module, f"schedule {passes}:\n{print_module(module)}")


@pytest.mark.parametrize("name", sorted(SCHEDULE_OPTIONS))
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(loop_programs(), st.data())
def test_each_pass_keeps_the_answer_and_is_idempotent(name, module, data):
    others = schedules(passes=tuple(p for p in SCHEDULE_OPTIONS if p != name))
    before = data.draw(st.one_of(others, in_order(before=name)))
    _keeps_the_answer_and_is_idempotent(name + data.draw(st.sampled_from(SCHEDULE_OPTIONS[name])), before, module)


@pytest.mark.parametrize("name", CONTRACTION_PASSES)
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(contraction_programs(dims=st.sampled_from((4, 8, 16)), ks=st.sampled_from((8, 16, 32))), st.data())
def test_each_pass_keeps_a_contractions_answer_and_is_idempotent(name, module, data):
    """The passes that schedule contractions act on what the ones before them in the pipeline made: those run
    first (each with probability 9/10, with options under which they act), on random contractions with
    prologues and epilogues."""
    run_pipeline(module, "tensor-to-loop")
    before = data.draw(in_order(CONTRACTION_OPTIONS, before=name, keep=9))
    options = CONTRACTION_OPTIONS[name] + SCHEDULE_OPTIONS[name]
    _keeps_the_answer_and_is_idempotent(name + data.draw(st.sampled_from(options)), before, module)


@st.composite
def _attention_programs(draw):
    """Small attention programs whose keys the chunks divide (prefill and decode shapes, GQA, masks)."""
    return attention_module(
        batch=1,
        kv_heads=draw(st.sampled_from((1, 2))),
        group=draw(st.sampled_from((1, 2))),
        queries=draw(st.sampled_from((1, 4, 16))),
        keys=draw(st.sampled_from((16, 32))),
        e=draw(st.sampled_from((4, 8))),
        ev=draw(st.sampled_from((4, 8))),
        mask=draw(st.sampled_from(("none", "causal", "add"))),
    )


@pytest.mark.parametrize("name", CONTRACTION_PASSES)
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(_attention_programs(), st.data())
def test_each_pass_keeps_attentions_answer_and_is_idempotent(name, module, data):
    """The same on attention (one online reduction carrying (m, l, O), the scores a reduction inside it)."""
    run_pipeline(module, "tensor-to-loop")
    before = data.draw(in_order(CONTRACTION_OPTIONS, before=name, keep=9))
    options = CONTRACTION_OPTIONS[name] + SCHEDULE_OPTIONS[name]
    _keeps_the_answer_and_is_idempotent(name + data.draw(st.sampled_from(options)), before, module)


def _keeps_the_answer_and_is_idempotent(text, before, module):
    assume(runs_somewhere(module))
    assume(schedule(module, before) is None)
    expected = interpret(module, seed=5)
    if schedule_step(module, text) is not None:
        return  # refused by the pass's check
    once = print_module(module)
    assert_close(expected, interpret(module, seed=5), module, f"{text} after {before}:\n{once}")
    run_pipeline(module, text)
    assert print_module(module) == once, f"{text} is not idempotent"


# ---- what each pass does, on the seed's RMSNorm and a softmax ---------------------------------------------------
RMS_LOOP = """func.func @forward(%x: f32[1,8,512]) -> f32[1,8,512] {
  %w = loop.param @weight : f32[512]
  %y = loop.buffer f32[1,8,512]
  loop.kernel @k_rms_norm {
    %eps = scalar.const 1e-06 : f32
    %n = scalar.const 512.0 : f32
    loop.for %a1 in 0..8 {
      %sum = loop.reduce %r2 in 0..512 add(0.0) -> f32 {
        %v = loop.load %x[0, %a1, %r2]
        %sq = scalar.mul %v, %v : f32
        loop.yield %sq
      }
      %mean = scalar.div %sum, %n : f32
      %me = scalar.add %mean, %eps : f32
      %r = scalar.rsqrt %me : f32
      loop.for %a2 in 0..512 {
        %v2 = loop.load %x[0, %a1, %a2]
        %wv = loop.load %w[%a2]
        %o = scalar.mul %v2, %r : f32
        %o2 = scalar.mul %o, %wv : f32
        loop.store %y[0, %a1, %a2] = %o2
      }
    }
  }
  func.return %y
}
"""


def _kernel(module) -> T.KernelOp:
    return next(op for op in module.walk() if isinstance(op, T.KernelOp))


def _scheduled(text: str, pipeline: str):
    m = parse_module(text)
    expected = interpret(m, seed=1)
    run_pipeline(m, pipeline)
    assert_close(expected, interpret(m, seed=1), m, pipeline)
    return m


def test_map_to_tile_is_one_thread_per_point():
    m = _scheduled(RMS_LOOP, "map-to-tile")
    k = _kernel(m)
    assert k.attributes["grid"] == (8, 1, 1) and k.attributes["block"] == (1, 1, 1)
    band = k.body.ops[-1]
    assert isinstance(band, T.ForOp) and band.bind == ("blockIdx.x",) and band.extents == (8,)


def test_map_to_tile_collapses_perfect_nests_and_sinks_what_sits_between():
    text = """func.func @forward(%x: f32[3,4,5]) -> f32[3,4,5] {
  %y = loop.buffer f32[3,4,5]
  loop.kernel @k {
    loop.for %a0 in 0..3 {
      %i = scalar.cast %a0 : index -> i64
      loop.for %a1 in 0..4 {
        loop.for %a2 in 0..5 {
          %v = loop.load %x[%a0, %a1, %a2]
          %f = scalar.cast %i : i64 -> f32
          %s = scalar.add %v, %f : f32
          loop.store %y[%a0, %a1, %a2] = %s
        }
      }
    }
  }
  func.return %y
}
"""
    m = _scheduled(text, "map-to-tile")
    (band,) = [op for op in m.walk() if isinstance(op, T.ForOp)]
    assert band.extents == (3, 4, 5) and _kernel(m).attributes["grid"] == (60, 1, 1)


def test_cooperative_reduce_shares_the_reduction_and_adds_the_combine():
    m = _scheduled(RMS_LOOP, "map-to-tile,tile-cooperative-reduce{threads=64}")
    k = _kernel(m)
    assert k.attributes["block"] == (64, 1, 1)
    (red,) = [op for op in k.walk() if isinstance(op, T.ReduceOp)]
    comb = red.parent.ops[red.parent.ops.index(red) + 1]
    assert red.bind == ("threadIdx.x",) and isinstance(comb, T.CombineOp) and comb.over == ("threadIdx.x",)
    assert list(comb.operands) == list(red.results)


def test_blockify_puts_the_write_back_loop_on_the_threads_and_rows_on_y():
    m = _scheduled(RMS_LOOP, "map-to-tile,tile-cooperative-reduce{threads=32},tile-blockify{threads=4}")
    k = _kernel(m)
    assert k.attributes["block"] == (32, 4, 1) and k.attributes["grid"] == (2, 1, 1)
    band, inner = [op for op in k.walk() if isinstance(op, T.ForOp)]
    assert band.bind == ("blockIdx.x", "threadIdx.y") and inner.bind == ("threadIdx.x",)


def test_blockify_alone_splits_the_band_over_threadIdx_x():
    m = _scheduled(RMS_LOOP, "map-to-tile,tile-blockify{threads=4}")
    k = _kernel(m)
    assert k.attributes["block"] == (4, 1, 1) and k.attributes["grid"] == (2, 1, 1)
    band = next(op for op in k.walk() if isinstance(op, T.ForOp))
    assert band.bind == ("blockIdx.x", "threadIdx.x")


def test_vectorize_takes_16_bytes_where_rows_allow():
    m = _scheduled(RMS_LOOP, "map-to-tile,tile-cooperative-reduce{threads=64},tile-blockify,tile-vectorize")
    vectors = {type(op).__name__: op.vector for op in _kernel(m).walk() if isinstance(op, T.LoopOp) and op.bind}
    assert vectors == {"ReduceOp": 4, "ForOp": 4} or sorted(vectors.values()) == [1, 4, 4]


def test_vectorize_refuses_strided_takes_value_uses():
    from irforge.dialects.tile.vectors import why_slow

    text = """func.func @forward(%x: f32[8,8]) -> (f32[8,8], f32[8]) {
  %y = tile.buffer f32[8,8]
  %z = tile.buffer f32[8]
  tile.kernel @k grid(1) block(8) {
    tile.for %a in 0..8 by threadIdx.x {
      tile.for %b in 0..8 {
        %v = tile.load %x[%b, %a]
        tile.store %y[%a, %b] = %v
      }
    }
    tile.for %c in 0..8 by threadIdx.x {
      %i = scalar.cast %c : index -> i64
      %f = scalar.cast %i : i64 -> f32
      tile.store %z[%c] = %f
    }
  }
  func.return %y, %z
}
"""
    m = parse_module(text)
    loops = [op for op in m.walk() if isinstance(op, T.ForOp)]
    assert "strides by 8" in why_slow(loops[1], 0, 2)
    assert why_slow(loops[1], 0, 3) == "its innermost extent 8 is not a multiple of 3"
    # An index used as a value is a tile of the lanes' indices (an iota), materialized and simulated exactly.
    assert why_slow(loops[2], 0, 2) is None
    expected = interpret(m, seed=1)
    run_pipeline(m, "kernel(tile-vectorize{width=2}),tile-to-kernel")
    assert "kernel.const [0, 1] : index[2]" in print_module(m)
    for a, b in zip(expected, interpret(m, seed=1)):
        np.testing.assert_array_equal(a, b)


@st.composite
def _reshaped_reads(draw):
    """(program, width, the width tile-vectorize{width} must take): a product whose left operand is read through a
    reshape, `x[(%r + b) floordiv c, (%r + b) mod c]` in rows of `cols` >= c elements (a slice), with unit
    dimensions around the subscripts; two rows of the product a block (their threads share x: it may be staged)."""
    c = draw(st.sampled_from((2, 3, 4, 6, 8, 12, 16, 24, 64)))
    n = c * draw(st.integers(1, 3))
    b = draw(st.sampled_from((0, 1, 2, 4, 8, 16)))
    cols = c + draw(st.sampled_from((0, 0, 2, 4, 8)))
    dt = draw(st.sampled_from(("f32", "bf16")))
    width = draw(st.sampled_from((2, 4, 8)))
    dims = [((b + n - 1) // c + 1, f"(%r + {b}) floordiv {c}"), (cols, f"(%r + {b}) mod {c}")]
    for at in draw(st.lists(st.integers(0, 2), max_size=3)):
        dims.insert(at, (1, "0"))
    shape, subs = ",".join(str(d) for d, _ in dims), ", ".join(e for _, e in dims)
    cast = "scalar.cast %m : bf16 -> f32" if dt == "bf16" else "scalar.add %m, %m : f32"
    text = f"""func.func @forward(%x: {dt}[{shape}], %w: {dt}[4,{n}]) -> f32[4] {{
  %y = tile.buffer f32[4]
  tile.kernel @k grid(2) block(4, 2) {{
    tile.for %a in 0..4 by blockIdx.x, threadIdx.y {{
      %p = tile.reduce %r in 0..{n} by threadIdx.x add(0.0) -> f32 {{
        %v = tile.load %x[{subs}]
        %u = tile.load %w[%a, %r]
        %m = scalar.mul %v, %u : {dt}
        %f = {cast}
        tile.yield %f
      }}
      %s = tile.combine add(%p) over threadIdx.x : f32
      tile.store %y[%a] = %s
    }}
  }}
  func.return %y
}}
"""
    # contiguous in each vector: w divides c and the shift; aligned: w divides the rows (and c the extent)
    want = width
    while c % want or b % want or cols % want:
        want //= 2
    return parse_module(text), width, want


# x staged in shared memory, swizzled or padded where the bank model says so
STAGED = "tile-stage-inputs,tile-swizzle-smem,tile-pad-smem"


@SETTINGS
@given(_reshaped_reads(), st.booleans())
def test_vectorize_takes_reads_through_a_reshape_and_keeps_the_answer(drawn, staged):
    """Vectors over `floordiv` and `mod` subscripts take the widest width whose lanes never carry across a multiple
    of the divisor and start aligned; the tile interpreter and, materialized, the kernel simulator agree with the
    scalar loop, with x read from global or shared memory."""
    m, width, want = drawn
    expected = interpret(m, seed=3)
    run_pipeline(m, f"kernel(tile-vectorize{{width={width}}})")
    (red,) = [op for op in m.walk() if isinstance(op, T.ReduceOp)]
    assert red.vector == want, print_module(m)
    assert_close(expected, interpret(m, seed=3), m, print_module(m))
    run_pipeline(m, f"kernel({STAGED if staged else 'cse'}),tile-to-kernel")
    text = print_module(m)
    vector = rf"\[{want}\]" if want > 1 else ""  # one load per vector, at its first lane
    assert re.search(rf"kernel\.load %x(_smem)?\[.*: \w+{vector}\n", text), text
    assert_close(expected, interpret(m, seed=3), m, text)


def test_stage_inputs_copies_the_row_once_and_loads_read_it():
    m = _scheduled(
        RMS_LOOP, "map-to-tile,tile-cooperative-reduce{threads=64},tile-blockify{threads=1},tile-stage-inputs"
    )
    k = _kernel(m)
    (stage,) = [op for op in k.walk() if isinstance(op, T.StageOp)]
    assert stage.source.name_hint == "x" and stage.box == (1, 1, 512)
    loads = [op for op in k.walk() if isinstance(op, T.LoadOp)]
    assert {ld.buffer.name_hint for ld in loads} == {"x_smem", "w"}  # w is read once per point: not staged


def test_stage_inputs_respects_its_budget_and_names():
    big = RMS_LOOP.replace("512", "2048")  # a row of 8 KB
    for opts, staged in (("{max-bytes=4096}", 0), ("{inputs=w}", 0), ("{inputs=x}", 1), ("", 1)):
        m = _scheduled(big, f"map-to-tile,tile-cooperative-reduce{{threads=64}},tile-stage-inputs{opts}")
        assert len([op for op in m.walk() if isinstance(op, T.StageOp)]) == staged, opts


# ---- refusals ---------------------------------------------------------------------------------------------------
def test_refusals_are_located_and_come_from_the_check():
    from irforge.passes.tile.blockify import TileBlockify

    m = parse_module(RMS_LOOP, "rms.ir")
    run_pipeline(m, "map-to-tile,tile-cooperative-reduce{threads=32}")
    why = TileBlockify(threads=64).check(_kernel(m))
    assert why == "threads=64 would give the block 2048 threads (the limit is 1024)"
    with pytest.raises(IRForgeError) as e:
        run_pipeline(m, "tile-blockify{threads=64}")
    assert "rms.ir:4:3: error:" in e.value.render() and why in e.value.render()


def test_cooperative_reduce_refuses_a_second_block_size():
    from irforge.passes.tile.cooperative_reduce import TileCooperativeReduce

    m = parse_module(RMS_LOOP, "rms.ir")
    run_pipeline(m, "map-to-tile")
    k = _kernel(m)
    k.set_axis_size("threadIdx.x", 16)
    why = TileCooperativeReduce(threads=64).check(k)
    assert why is not None and "already has 16 threads" in why
    with pytest.raises(IRForgeError) as e:
        run_pipeline(m, "tile-cooperative-reduce{threads=64}")
    assert "rms.ir:4:3" in e.value.render() and "already has 16 threads" in e.value.render()


def test_blockify_refuses_uneven_rows_under_a_combine():
    from irforge.passes.tile.blockify import TileBlockify

    m = parse_module(RMS_LOOP.replace("0..8", "0..6"), "rms.ir")
    run_pipeline(m, "map-to-tile,tile-cooperative-reduce{threads=32}")
    why = TileBlockify(threads=4).check(_kernel(m))
    assert why is not None and "does not divide the band's 6 points" in why
    assert TileBlockify(threads=2).check(_kernel(m)) is None


# ---- options: the kernel's tune attribute, and the replaceable heuristic ----------------------------------------
def test_a_kernels_tune_attribute_overrides_the_pipeline_options():
    text = RMS_LOOP.replace(
        "loop.kernel @k_rms_norm {",
        "loop.kernel @k_rms_norm attributes {tune = {tile-cooperative-reduce = {threads = 128}}} {",
    )
    m = _scheduled(text, "loop-to-tile")
    assert _kernel(m).attributes["block"][0] == 128
    assert print_module(parse_module(print_module(m))) == print_module(m)


def test_the_default_heuristic_is_replaceable():
    from irforge.passes.tile import heuristics

    class Narrow(heuristics.Heuristic):
        def cooperative_threads(self, kernel, reduce):
            return 128

    old = heuristics.set_heuristic(Narrow())
    try:
        m = _scheduled(RMS_LOOP, "loop-to-tile")
    finally:
        heuristics.set_heuristic(old)
    assert _kernel(m).attributes["block"][0] == 128
    m = _scheduled(RMS_LOOP, "loop-to-tile")
    assert _kernel(m).attributes["block"][0] == 32  # 512 f32 elements, 64 bytes per thread


def test_every_option_is_declared_with_a_domain():
    from irforge.registry import registry

    for name, cls in registry().passes().items():
        if name.startswith("tile-"):
            for opt in cls.options.values():
                assert opt.domain is not None or opt.type is not int, f"{name}: option {opt.name} has no domain"
