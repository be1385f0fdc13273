"""One swizzle per register-tile access (passes/tile_to_kernel/swizzle_runs.py): the bits an index expression may
have cover every value its loop indices take (lane 0's, enumerated from the loop's layout); where `xor_runs` holds,
every run's swizzled address is the first element's XOR the run's swizzled offset, for every value; and the f32
product of a K-major weight that spilled under a swizzle compiles without spilling."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from irforge.dialects import tile as T
from irforge.dialects.loop.indexing import ValueDim
from irforge.dialects.tile import vectors
from irforge.passes.tile_to_kernel.swizzle_runs import possible_bits, xor_runs
from loopgen import tensor_module

from irforge import index_expr as ix
from irforge.parser import parse_module
from irforge.pass_manager import run_pipeline
from irforge.types import f32, tensor

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


def _loops(e0, e1, v0, v1, g0, g1, k, vr):
    text = f"""func.func @f(%x: f32[{e0},{e1}], %w: f32[{k}]) -> f32[{e0},{e1}] {{
  %y = tile.buffer f32[{e0},{e1}]
  tile.kernel @k grid(1) block(32) {{
    tile.for %a, %b in 0..{e0}, 0..{e1} by threadIdx.x vector [{v0}, {v1}] split [{g0}, {g1}] {{
      %s = tile.reduce %r in 0..{k} vector {vr} add(0.0) -> f32 {{
        %u = tile.load %w[%r]
        tile.yield %u
      }}
      %v = tile.load %x[%a, %b]
      %o = scalar.add %v, %s : f32
      tile.store %y[%a, %b] = %o
    }}
  }}
  func.return %y
}}
"""
    m = parse_module(text)
    band = next(op for op in m.walk() if isinstance(op, T.ForOp))
    red = next(op for op in m.walk() if isinstance(op, T.ReduceOp))
    return band, red


def _lane0_values(band, red):
    """Every (a, b, r) lane 0 of a work item takes: from the layouts' own definition of a work item's indices."""
    lay, rlay = band.layout, red.layout
    ab = {tuple(lay.index(d, c, 0) for d, c in enumerate(lay.work_coords(w))) for w in range(lay.work_items)}
    rs = {rlay.index(0, rlay.work_coords(w)[0], 0) for w in range(rlay.work_items)}
    return [(a, b, r) for (a, b), r in itertools.product(sorted(ab), sorted(rs))]


@st.composite
def loops(draw):
    e0, e1 = draw(st.sampled_from([8, 16, 32, 64])), draw(st.sampled_from([8, 16, 32, 64]))
    v0, v1 = draw(st.sampled_from([1, 2, 4, 8])), draw(st.sampled_from([1, 2, 4, 8]))
    g0 = draw(st.sampled_from([g for g in (1, 2) if v0 % g == 0]))
    g1 = draw(st.sampled_from([g for g in (1, 2) if v1 % g == 0]))
    k, vr = draw(st.sampled_from([8, 16, 32])), draw(st.sampled_from([1, 4]))
    return _loops(e0, e1, v0, v1, g0, g1, k, vr)


@st.composite
def offsets(draw, ivs):
    """A linear offset over the indices: coefficients as row strides make them (powers of two, padded rows)."""
    e = ix.Const(draw(st.sampled_from([0, 0, 1, 4, 16, 64])))
    for iv in ivs:
        c = draw(st.sampled_from([0, 1, 2, 4, 16, 17, 20, 64, 68]))
        if c:
            e = e + ix.Const(c) * ValueDim(iv)
    return e


def _offset_in(lp, data):
    """The loops (band, reduction), their induction variables, and an offset drawn over them."""
    band, red = lp
    ivs = [*band.ivs, *red.ivs]
    return band, red, ivs, data.draw(offsets(ivs))


def _lanes(band, red):
    return [vectors.LaneDim(lp, d) for lp in (band, red) for d, w in enumerate(lp.vector_shape) if w > 1]


@SETTINGS
@given(loops(), st.data())
def test_possible_bits_cover_every_value(lp, data):
    band, red, ivs, e = _offset_in(lp, data)
    bits = possible_bits(e, _lanes(band, red))
    if bits is None:
        return
    for vals in _lane0_values(band, red):
        v = e.evaluate(dict(zip(ivs, vals)))
        assert v & ~bits == 0, f"{e} = {v} at {vals} has a bit outside {bits:#x}"


def _swizzle(o: int, sw) -> int:
    b, m, s = sw
    return o ^ (((o >> (m + s)) & ((1 << b) - 1)) << m)


@SETTINGS
@given(loops(), st.data())
def test_xor_runs_addresses_every_run_as_the_swizzle_of_its_sum(lp, data):
    band, red, ivs, e = _offset_in(lp, data)
    shape = (data.draw(st.sampled_from([1, 2])), data.draw(st.sampled_from([1, 2, 4])), 4)
    strides = (data.draw(st.sampled_from([32, 64, 512])), data.draw(st.sampled_from([4, 16, 20, 64])), 1)
    ring = data.draw(st.sampled_from([1, 2, 3]))
    slot = (ring, data.draw(st.sampled_from([1024, 1040]))) if ring > 1 else None
    sw = (data.draw(st.integers(1, 3)), 2, data.draw(st.integers(1, 5)))
    if not xor_runs(e, shape, strides, None, f32, _lanes(band, red), slot):
        return
    runs = [i * strides[0] + j * strides[1] for i in range(shape[0]) for j in range(shape[1])]
    for vals in _lane0_values(band, red):
        for s in range(slot[0] if slot else 1):
            first = e.evaluate(dict(zip(ivs, vals))) + (s * slot[1] if slot else 0)
            for c in runs:
                assert _swizzle(first + c, sw) == _swizzle(first, sw) ^ _swizzle(c, sw), (e, vals, s, c)


def test_a_k_major_weight_swizzled_under_split_k_compiles_without_spilling():
    """Regression (test_reach_cuda drew it; its schedule pinned, the defaults having moved since): silu(xᵀ @ wᵀ),
    x [2048, 64] and w [64, 2048] f32 (M = N = 64, K = 2048): 64 x 64 tiles of 64 threads, split-K 16 via
    partials, x copied by the tensor memory accelerator, w [64, 16] slabs swizzled (3, 2, 4). Each swizzled read
    of w's 8 rows a step took its own address registers: ptxas held the partial kernel at 128 registers under
    __launch_bounds__(64) and spilled 52 bytes. One swizzle a read fits."""
    from irforge.passes.torch_to_tensor.common import matmul
    from test_reach_cuda import _assert_no_spills, _compiled

    def build(b, x):
        w = b.param("w", tensor(f32, 64, 2048))
        y = matmul(b, b.permute(x, [1, 0]), w, w_transposed=True, out_dtype=f32)
        return [b.ew("mul", y, b.ew("sigmoid", y))]

    from irforge.passes.tile import heuristics

    class AsDrawn(heuristics.Heuristic):  # the schedule the defaults gave when it was drawn (6dccff8)
        def contraction_tile(self, kernel, band, m_dim, n_dim):
            return 64, 64, 64

        def reduce_splits(self, kernel, reduce):
            return 16

    module = tensor_module([tensor(f32, 2048, 64)], ["x"], build)
    old = heuristics.set_heuristic(AsDrawn())
    try:
        run_pipeline(module, "tensor-to-loop,loop-to-tile")
    finally:
        heuristics.set_heuristic(old)
    stages = {st.operands[0].name_hint: st for st in module.walk() if isinstance(st, T.StageOp)}
    assert stages["x"].copy == "tma" and any(st.attributes.get("swizzle") == (3, 2, 4) for st in stages.values())
    shares = [r.extents[0] for r in module.walk() if isinstance(r, T.ReduceOp) and "blockIdx.y" in r.bind]
    assert shares == [16]
    usage = _compiled(module)
    assert any(name.endswith("_partial") for name in usage)
    _assert_no_spills(usage)
