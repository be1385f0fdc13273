"""The loop and scalar dialects: round trip, verifier, and the loop interpreter against references."""

from __future__ import annotations

import loopgen
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from irforge.dialects.loop import interpreter
from irforge.dialects.loop.interpreter import interpret

from irforge.diagnostics import IRForgeError
from irforge.hashing import structurally_equal
from irforge.parser import parse_module
from irforge.printer import print_module
from irforge.scalar_ops import MONOIDS, SCALAR_OPS, quantize
from irforge.testing.strategies import loop_programs
from irforge.types import bf16, f16, f32


# ---- round trip ------------------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(loop_programs())
def test_round_trip(module):
    text = print_module(module)
    again = parse_module(text)
    assert structurally_equal(again, module)
    assert print_module(again) == text
    generic = parse_module(print_module(module, generic=True))
    assert structurally_equal(generic, module)


def test_index_operands_are_numbered_by_first_appearance():
    text = """func.func @f(%x: f32[4,4]) -> f32[4,4] {
  %t = loop.buffer f32[4,4]
  loop.kernel @k {
    loop.for %a0 in 0..4 {
      loop.for %a1 in 0..4 {
        %v = loop.load %x[%a1, (%a0 + %a1) mod 4]
        loop.store %t[%a0, %a1] = %v
      }
    }
  }
  func.return %t
}
"""
    m = parse_module(text)
    load = next(op for op in m.walk() if op.name == "loop.load")
    assert [v.name_hint for v in load.indices] == ["a1", "a0"]
    assert str(load.attributes["index"]) == "affine_map<(d0, d1) -> (d0, (d1 + d0) mod 4)>"
    assert print_module(m) == text


# ---- interpreter -----------------------------------------------------------------------------------------------
def _check(module, seed=0, rtol=1e-4, atol=1e-5):
    args = loopgen.random_inputs(module, seed)
    fast = interpret(module, args)
    slow = loopgen.naive_interpret(module, args)
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


@settings(max_examples=40, deadline=None)
@given(loop_programs())
def test_interpreter_matches_naive_loops(module):
    _check(module)


@settings(max_examples=15, deadline=None)
@given(loop_programs(dtypes=(f16, bf16)))
def test_interpreter_half_types(module):
    _check(module, rtol=1e-2, atol=1e-2)


@settings(max_examples=15, deadline=None)
@given(loop_programs())
def test_interpreter_in_chunks(module):
    """At most 3 iterations at once: every loop runs in chunks, and reductions combine partial carriers."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(interpreter, "MAX_ELEMENTS", 3)
        _check(module)


MATMUL = """func.func @f(%x: f32[16,64], %w: f32[64,16], %bias: f32[64]) -> f32[16,16] {
  %out = loop.buffer f32[16,16]
  loop.kernel @k {
    loop.for %a0 in 0..16 {
      loop.for %a1 in 0..16 {
        %acc = loop.reduce %a2 in 0..64 add(0.0) -> f32 {
          %b = loop.load %bias[%a2]
          %xv = loop.load %x[%a0, %a2]
          %wv = loop.load %w[%a2, %a1]
          %v0 = scalar.add %xv, %b : f32
          %v1 = scalar.mul %v0, %wv : f32
          loop.yield %v1
        }
        %zero = scalar.const 0.0 : f32
        %r = scalar.maximum %acc, %zero : f32
        loop.store %out[%a0, %a1] = %r
      }
    }
  }
  func.return %out
}
"""


def test_matmul_against_numpy():
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((16, 64), (64, 16), (64,)))
    (out,) = interpret(parse_module(MATMUL), [x, w, b])
    np.testing.assert_allclose(out, np.maximum((x + b) @ w, 0), rtol=1e-5, atol=1e-5)


ONLINE_SOFTMAX = """func.func @f(%x: f32[3,50]) -> f32[3,50] {
  %y = loop.buffer f32[3,50]
  loop.kernel @k {
    loop.for %a0 in 0..3 {
      %m, %s = loop.reduce %a1 in 0..50 online(-inf, 0.0) -> f32, f32 {
        %v = loop.load %x[%a0, %a1]
        %one = scalar.const 1.0 : f32
        loop.yield %v, %one
      }
      loop.for %a1 in 0..50 {
        %v = loop.load %x[%a0, %a1]
        %d = scalar.sub %v, %m : f32
        %e = scalar.exp %d : f32
        %p = scalar.div %e, %s : f32
        loop.store %y[%a0, %a1] = %p
      }
    }
  }
  func.return %y
}
"""


@pytest.mark.parametrize("chunked", [False, True])
def test_online_softmax_against_numpy(chunked, monkeypatch):
    if chunked:
        monkeypatch.setattr(interpreter, "MAX_ELEMENTS", 7)
    x = np.random.default_rng(2).standard_normal((3, 50)).astype(np.float32) * 10
    x[1, :20] = -np.inf  # rows with -inf terms: chunks holding only -inf must not poison the sum
    (y,) = interpret(parse_module(ONLINE_SOFTMAX), [x])
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_reshape_gather_and_casts():
    text = """func.func @f(%x: f32[6,4], %ids: i64[3]) -> (f32[4,6], bf16[3,4]) {
  %t = loop.buffer f32[4,6]
  %g = loop.buffer bf16[3,4]
  loop.kernel @k_reshape {
    loop.for %a0 in 0..4 {
      loop.for %a1 in 0..6 {
        %flat = loop.index %a0 * 6 + %a1
        %v = loop.load %x[%flat floordiv 4, %flat mod 4]
        loop.store %t[%a0, %a1] = %v
      }
    }
  }
  loop.kernel @k_gather {
    loop.for %a0 in 0..3 {
      loop.for %a1 in 0..4 {
        %id = loop.load %ids[%a0]
        %row = scalar.cast %id : i64 -> index
        %v = loop.load %x[%row, %a1]
        %h = scalar.cast %v : f32 -> bf16
        loop.store %g[%a0, %a1] = %h
      }
    }
  }
  func.return %t, %g
}
"""
    x = np.random.default_rng(3).standard_normal((6, 4)).astype(np.float32)
    ids = np.array([5, 0, 2])
    t, g = interpret(parse_module(text), [x, ids])
    np.testing.assert_array_equal(t, x.reshape(4, 6))
    np.testing.assert_array_equal(g, quantize(x[ids], bf16))


def test_out_of_bounds_is_a_located_error():
    text = """func.func @f(%x: f32[4], %ids: i64[2]) -> f32[2] {
  %t = loop.buffer f32[2]
  loop.kernel @k {
    loop.for %a0 in 0..2 {
      %id = loop.load %ids[%a0]
      %i = scalar.cast %id : i64 -> index
      %v = loop.load %x[%i]
      loop.store %t[%a0] = %v
    }
  }
  func.return %t
}
"""
    with pytest.raises(IRForgeError) as e:
        interpret(parse_module(text, "g.ir"), [np.zeros(4, np.float32), np.array([1, 4])])
    assert "g.ir:7:7: error: load out of bounds: subscript 0 reaches 4 in a dimension of size 4" in e.value.render()


def test_wrong_argument_shape_is_an_error():
    with pytest.raises(IRForgeError, match=r"input %x has shape \[2\], but the IR expects f32\[16,64\]"):
        interpret(parse_module(MATMUL), [np.zeros(2), np.zeros((64, 16)), np.zeros(64)])


# ---- the monoid table ------------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(sorted(MONOIDS)),
    st.lists(st.floats(-30, 30, width=32) | st.just(float("-inf")), min_size=0, max_size=9),
    st.integers(0, 9),
)
def test_monoid_reduce_agrees_with_folding_combine(name, xs, cut):
    """The fast numpy fold of an axis equals folding the combine program element by element, and splitting."""
    m = MONOIDS[name]
    width = 2 if name == "online" else 1
    if name != "online":
        xs = [x for x in xs if np.isfinite(x)]
    types = [f32] * width
    x = np.array(xs, dtype=np.float32)
    comps = (x, np.full_like(x, 1.5))[:width]
    fast = m.reduce(comps, 0, types)
    acc = tuple(np.float32(m.identity(f32, i)) for i in range(width))
    for i in range(len(x)):
        acc = m.combine(acc, tuple(c[i] for c in comps), types)
    cut = min(cut, len(x))
    split = m.combine(
        m.reduce(tuple(c[:cut] for c in comps), 0, types), m.reduce(tuple(c[cut:] for c in comps), 0, types), types
    )
    for a, b, c in zip(fast, acc, split):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-30, 30, width=32) | st.just(float("-inf")), min_size=0, max_size=6),
    st.lists(st.floats(-30, 30, width=32) | st.just(float("-inf")), min_size=1, max_size=9),
)
def test_keyed_fold_agrees_with_combining_the_fold(before, chunk):
    """A chunk folded by `keyed_program` (the key joined first, the carrier's sums read at it, then each element's
    added) equals the combine of the carrier with the chunk's fold, carriers with no terms (-inf) included."""
    m = MONOIDS["online"]
    types = [f32] * 3
    rng = np.random.default_rng(len(before) * 10 + len(chunk))

    def elements(xs):
        x = np.array(xs, dtype=np.float32)
        return x, np.ones_like(x), rng.standard_normal(len(x)).astype(np.float32)

    carrier = m.reduce(elements(before), 0, types)
    elems = elements(chunk)
    expected = m.combine(carrier, m.reduce(elems, 0, types), types)
    join, steps, outputs = m.keyed_program(3)

    def at(components, k):
        env = {f"a{i}": np.float32(c) for i, c in enumerate(components)} | {"k": k}
        with np.errstate(all="ignore"):
            for s in steps:
                env[s.result] = SCALAR_OPS[s.op].numpy(*(env[a] if isinstance(a, str) else a for a in s.args))
        return [env[o] for o in outputs]

    k = carrier[0]
    for x in elems[0]:
        k = SCALAR_OPS[join].numpy(k, x)
    sums = at(carrier, k)
    for e in zip(*elems):
        sums = [s + t for s, t in zip(sums, at(e, k))]
    for got, want in zip([k, *sums], expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert MONOIDS["add"].keyed_program(1) is None


def test_online_carrier_means_max_and_rescaled_sum():
    x = np.array([1.0, 3.0, -np.inf, 2.0], dtype=np.float32)
    w = np.array([2.0, 1.0, 5.0, 0.5], dtype=np.float32)
    m, s = MONOIDS["online"].reduce((x, w), 0, [f32, f32])
    assert m == 3.0
    np.testing.assert_allclose(s, 2 * np.exp(-2.0) + 1 + 0.5 * np.exp(-1.0), rtol=1e-6)


def test_monoid_component_inputs_follow_the_combine():
    """What each component of a combine reads, derived from `combine_program`, against the algebra by hand: the
    online max reads only the maxima; each rescaled sum reads the maxima and itself; `add` reads itself."""
    assert MONOIDS["online"].component_inputs(3) == ({0}, {0, 1}, {0, 2})
    assert MONOIDS["add"].component_inputs(1) == ({0},)
