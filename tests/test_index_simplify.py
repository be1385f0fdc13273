"""`index_expr.value_range` and `index_expr.simplify`: sound ranges and equivalent simplifications, on every point."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from irforge import index_expr as ix
from irforge.index_expr import Const, Dim


def exprs(ndims: int):
    leaves = st.one_of(st.integers(-3, 9).map(Const), st.integers(0, ndims - 1).map(Dim))

    def extend(sub):
        pos = st.integers(1, 7).map(Const)
        return st.one_of(
            st.tuples(sub, sub).map(lambda p: ix.Add(*p)),
            st.tuples(sub, sub).map(lambda p: ix.Sub(*p)),
            st.tuples(sub, st.integers(-3, 5).map(Const)).map(lambda p: ix.Mul(*p)),
            st.tuples(sub, pos).map(lambda p: ix.FloorDiv(*p)),
            st.tuples(sub, pos).map(lambda p: ix.CeilDiv(*p)),
            st.tuples(sub, pos).map(lambda p: ix.Mod(*p)),
            st.tuples(sub, sub).map(lambda p: ix.Min(*p)),
            st.tuples(sub, sub).map(lambda p: ix.Max(*p)),
        )

    return st.recursive(leaves, extend, max_leaves=8)


def points(extents):
    return list(itertools.product(*(range(n) for n in extents)))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=3).flatmap(lambda ext: st.tuples(st.just(ext), exprs(len(ext))))
)
def test_simplify_is_equivalent_and_range_is_sound(case):
    extents, e = case
    s = ix.simplify(e, extents)
    r = ix.value_range(e, extents)
    for p in points(extents):
        v = e.evaluate(p)
        assert s.evaluate(p) == v, f"{e} -> {s} differs at {p}"
        if r is not None:
            assert r[0] <= v <= r[1], f"{e}: {v} at {p} outside {r}"


def test_simplify_folds_reshape_round_trips():
    d0, d1, d2 = Dim(0), Dim(1), Dim(2)
    assert ix.simplify((d0 * 3 + d1) // 3, [4, 3]) == d0
    assert ix.simplify((d0 * 3 + d1) % 3, [4, 3]) == d1
    assert ix.simplify(((d0 * 12 + d1 * 4 + d2) // 4) % 3, [2, 3, 4]) == d1
    assert ix.simplify((d0 // 3) * 3 + d0 % 3, [12]) == d0
    assert ix.simplify(ix.Min(d0, Const(7)), [8]) == d0
    assert ix.simplify(d0 * 5 + d1, [1, 5]) == d1  # a dimension of extent 1 is 0
    # what the ranges do not decide stays
    assert ix.simplify(d0 % 3, [4]) == ix.Mod(d0, Const(3))


def test_value_range_examples():
    d0, d1 = Dim(0), Dim(1)
    assert ix.value_range(d0 * 4 + d1, [3, 4]) == (0, 11)
    assert ix.value_range(ix.Mod(d0 - 5, Const(4)), [3]) == (0, 3)
    assert ix.value_range(ix.FloorDiv(d0, d1), [3, 4]) is None  # the divisor may be 0
    assert np.all(np.array(ix.value_range(ix.Max(d0 - 2, Const(0)), [5])) == (0, 2))


def test_simplify_sees_through_split_and_merge():
    # repeat_kv: expand [2,2,11,16] to [2,2,2,11,16] and merge heads -> head h reads kv head h floordiv 2
    d1, d3, d4 = Dim(1), Dim(3), Dim(4)
    extents = [2, 4, 11, 11, 16]
    assert ix.simplify(ix.FloorDiv(d1 * 176 + d3 * 16 + d4, Const(352)), extents) == ix.FloorDiv(d1, Const(2))
    assert ix.simplify(ix.Mod(d1 * 176 + d3 * 16 + d4, Const(352)), extents) == ix.simplify(
        ix.Mod(d1, Const(2)) * 176 + d3 * 16 + d4, extents
    )
