"""The tile dialect: its syntax round-trips (hypothesis: random programs under random schedules, in the custom and
the generic form), the interpreter follows the schedule's semantics (against numpy), and it reports what it can
see going wrong."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from tilegen import loop_programs, runs_somewhere, schedule, schedules

from irforge.diagnostics import IRForgeError
from irforge.hashing import structurally_equal
from irforge.interpreter import interpret
from irforge.parser import parse_module
from irforge.pass_manager import run_pipeline
from irforge.printer import print_module
from irforge.verifier import verify


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(loop_programs(), schedules())
def test_scheduled_programs_round_trip(module, passes):
    assume(runs_somewhere(module))
    assume(schedule(module, passes) is None)
    verify(module)
    text = print_module(module)
    again = parse_module(text)
    assert print_module(again) == text
    assert structurally_equal(again, module)
    assert structurally_equal(parse_module(print_module(module, generic=True)), module)


def _run(text: str, *inputs):
    return interpret(parse_module(text, "t.ir"), list(inputs))


def test_strided_distribution_covers_every_point_once_for_any_launch_size():
    x = np.arange(30, dtype=np.float32).reshape(5, 6)
    for grid, block, vector in [(1, 1, 1), (2, 4, 2), (7, 3, 1), (16, 32, 3)]:
        text = f"""func.func @f(%x: f32[5,6]) -> f32[5,6] {{
  %y = tile.buffer f32[5,6]
  tile.kernel @k grid({grid}) block({block}) {{
    tile.for %a, %b in 0..5, 0..6 by blockIdx.x, threadIdx.x vector {vector} {{
      %v = tile.load %x[%a, %b]
      %w = scalar.neg %v : f32
      tile.store %y[%a, %b] = %w
    }}
  }}
  func.return %y
}}
"""
        (y,) = _run(text, x)
        np.testing.assert_array_equal(y, -x)


def test_combine_folds_the_threads_along_its_axes_only():
    x = np.random.default_rng(0).standard_normal((4, 3, 8)).astype(np.float32)
    text = """func.func @f(%x: f32[4,3,8]) -> (f32[4,3], f32[4,3]) {
  %s_out = tile.buffer f32[4,3]
  %m_out = tile.buffer f32[4,3]
  tile.kernel @k grid(4) block(8, 3) {
    %one = scalar.const 1.0 : f32
    tile.for %a in 0..4 by blockIdx.x {
      tile.for %b in 0..3 by threadIdx.y {
        %p, %pm, %ps = tile.reduce %r in 0..8 by threadIdx.x add(0.0), online(-inf, 0.0) -> f32, f32, f32 {
          %v = tile.load %x[%a, %b, %r]
          tile.yield %v, %v, %one
        }
        %s, %m, %e = tile.combine add(%p), online(%pm, %ps) over threadIdx.x : f32, f32, f32
        %l = scalar.log %e : f32
        %lse = scalar.add %m, %l : f32
        tile.store %s_out[%a, %b] = %s
        tile.store %m_out[%a, %b] = %lse
      }
    }
  }
  func.return %s_out, %m_out
}
"""
    s, lse = _run(text, x)
    np.testing.assert_allclose(s, x.sum(-1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lse, np.log(np.exp(x.astype(np.float64)).sum(-1)), rtol=1e-5)


def test_a_store_two_threads_make_is_reported():
    text = """func.func @f(%x: f32[4]) -> f32[4] {
  %y = tile.buffer f32[4]
  tile.kernel @k grid(1) block(8) {
    tile.for %a in 0..8 by threadIdx.x {
      %v = tile.load %x[%a floordiv 2]
      tile.store %y[%a floordiv 2] = %v
    }
  }
  func.return %y
}
"""
    with pytest.raises(IRForgeError) as e:
        _run(text, np.ones(4, np.float32))
    assert "t.ir:6:7" in e.value.render() and "another thread of the launch stores too" in e.value.render()


def test_stores_outside_distributed_loops_happen_once():
    text = """func.func @f(%x: f32[4]) -> f32[] {
  %y = tile.buffer f32[]
  tile.kernel @k grid(3) block(8) {
    %s = tile.reduce %r in 0..4 add(0.0) -> f32 {
      %v = tile.load %x[%r]
      tile.yield %v
    }
    tile.store %y[] = %s
  }
  func.return %y
}
"""
    (y,) = _run(text, np.arange(4, dtype=np.float32))
    assert float(y) == 6.0


# Every thread along x stores its own partial of a reduction shared along x, uncombined, to one element.
RACY = """func.func @f(%x: f32[4,64]) -> f32[4] {
  %y = tile.buffer f32[4]
  tile.kernel @k grid(4) block(32) {
    tile.for %a0 in 0..4 by blockIdx.x {
      %p = tile.reduce %r in 0..64 by threadIdx.x add(0.0) -> f32 {
        %v = tile.load %x[%a0, %r]
        tile.yield %v
      }
      tile.store %y[%a0] = %p
    }
  }
  func.return %y
}
"""


@pytest.mark.parametrize(
    "pipeline",
    ["", "kernel(tile-blockify{threads=16})", "tile-to-kernel", "kernel(tile-blockify{threads=16}),tile-to-kernel"],
)
def test_a_store_threads_disagree_on_is_reported_by_the_interpreter_and_the_simulator(pipeline):
    m = parse_module(RACY, "racy.ir")
    run_pipeline(m, pipeline)
    with pytest.raises(IRForgeError) as e:
        interpret(m, [np.arange(256, dtype=np.float32).reshape(4, 64)])
    text = e.value.render()
    assert text.startswith("racy.ir:9:7: error: ")  # at the store, before and after lowering
    assert "threadIdx.x" in text and "single-writer rule" in text and "combine them first" in text


def test_combined_partials_agree_and_store_once():
    combined = RACY.replace(
        "      tile.store %y[%a0] = %p",
        "      %s = tile.combine add(%p) over threadIdx.x : f32\n      tile.store %y[%a0] = %s",
    )
    x = np.arange(256, dtype=np.float32).reshape(4, 64)
    for pipeline in ("", "tile-to-kernel"):
        m = parse_module(combined, "t.ir")
        run_pipeline(m, pipeline)
        (y,) = interpret(m, [x])
        np.testing.assert_allclose(y, x.sum(axis=1))


def test_loads_past_the_staged_box_are_reported():
    text = """func.func @f(%x: f32[4,8]) -> f32[4,8] {
  %y = tile.buffer f32[4,8]
  tile.kernel @k grid(4) block(8) {
    tile.for %a in 0..4 by blockIdx.x {
      %s = tile.stage %x[%a, 0] -> smem : f32[1,4]
      tile.for %b in 0..8 by threadIdx.x {
        %i = tile.index %b mod 4 + %b floordiv 4 * 4
        %v = tile.load %s[0, %i]
        tile.store %y[%a, %b] = %v
      }
    }
  }
  func.return %y
}
"""
    with pytest.raises(IRForgeError) as e:
        _run(text, np.ones((4, 8), np.float32))
    assert "t.ir:8:9" in e.value.render() and "staged box out of bounds" in e.value.render()


@pytest.mark.parametrize("offset, reaches", [(2, None), (3, 8)])
def test_loads_are_checked_on_the_lanes_a_loop_runs(offset, reaches):
    """Six iterations over eight threads: the two threads past them run nothing. A subscript the six live lanes
    keep in bounds loads their elements; one past the end on a live lane is reported, with the subscript it
    reached."""
    text = f"""func.func @f(%x: f32[8]) -> f32[6] {{
  %y = tile.buffer f32[6]
  tile.kernel @k grid(1) block(8) {{
    tile.for %b in 0..6 by threadIdx.x {{
      %i = tile.index %b + {offset}
      %v = tile.load %x[%i]
      tile.store %y[%b] = %v
    }}
  }}
  func.return %y
}}
"""
    x = np.arange(8, dtype=np.float32)
    if reaches is None:
        (y,) = _run(text, x)
        np.testing.assert_array_equal(y, x[offset : offset + 6])
        return
    with pytest.raises(IRForgeError) as e:
        _run(text, x)
    assert f"load out of bounds: subscript 0 reaches {reaches} in a dimension of size 8" in e.value.render()
