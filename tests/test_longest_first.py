"""tile-longest-first: the band's blocks dealt longest first where a mask gives some blocks more trips keep the
answer (the tile interpreter before and after the pass, the kernel simulator after tile-to-kernel), and the block
dealt first is one whose mask keeps the most elements (counted by hand from the mask, not read off the pass)."""

from __future__ import annotations

import loopgen
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from irforge.dialects import tile as T
from irforge.passes.tile.longest_first import work_slopes
from test_attention_schedules import _passes
from tilegen import assert_close

from irforge.interpreter import interpret
from irforge.parser import parse_module
from irforge.pass_manager import run_pipeline
from irforge.printer import print_module

# A masked prefix sum over `cmp` (keep where `%j CMP %i`, or drop there with `drop`): block (b, t) reduces row b's
# elements j against its rows i = t * rows + p.
PREFIX = """
func.func @forward(%x: f32[{batch},{n}]) -> f32[{batch},{n}] {{
  %y = tile.buffer f32[{batch},{n}]
  tile.kernel @k grid({blocks}) block({rows}) {{
    %zero = scalar.const 0.0 : f32
    tile.for %b, %t in 0..{batch}, 0..{tiles} by blockIdx.x {{
      tile.for %p in 0..{rows} by threadIdx.x {{
        %i = tile.index %t * {rows} + %p
        %s = tile.reduce %j in 0..{n} add(0.0) -> f32 {{
          %c = scalar.{cmp} %j, %i : bool
          %a = tile.load %x[%b, %j]
          %e = scalar.select %c, {sides} : f32
          tile.yield %e
        }}
        tile.store %y[%b, %t * {rows} + %p] = %s
      }}
    }}
  }}
  func.return %y
}}
"""
KEEPS = {"le": np.less_equal, "lt": np.less, "ge": np.greater_equal, "gt": np.greater}


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.integers(1, 3),
    st.integers(2, 6),
    st.sampled_from((1, 2, 4)),
    st.sampled_from(tuple(KEEPS)),
    st.booleans(),
)
def test_masked_prefix_sums_deal_the_longest_block_first(batch, tiles, rows, cmp, drop):
    n = tiles * rows
    sides = "%zero, %a" if drop else "%a, %zero"
    text = PREFIX.format(batch=batch, n=n, blocks=batch * tiles, rows=rows, tiles=tiles, cmp=cmp, sides=sides)
    module = parse_module(text)
    expected = interpret(module, seed=3)
    run_pipeline(module, "kernel(tile-longest-first)")
    out = print_module(module)
    assert_close(expected, interpret(module, seed=3), module, f"after tile-longest-first:\n{out}")
    (band,) = [lp for lp in module.walk() if isinstance(lp, T.ForOp) and lp.bind == ("blockIdx.x",)]
    assert [iv.name_hint for iv in band.ivs] == ["t", "b"], out
    # The elements block t keeps, by hand: j against i = t * rows + p over its rows p.
    i = np.arange(n).reshape(tiles, rows, 1)
    kept = KEEPS[cmp](np.arange(n), i)
    work = (~kept if drop else kept).sum(axis=(1, 2))
    first = tiles - 1 if "- %t" in out else 0  # the t that blockIdx.x 0 (work item 0) takes
    assert work[first] == work.max(), (work, out)
    assert work_slopes(band) == {(0, -1)}, out  # dealt longest first: a second run leaves it (idempotent)


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from(((1, 1), (2, 2), (1, 3))),
    st.sampled_from((16, 24, 40)),
    st.sampled_from((4, 8)),
)
def test_causal_attention_dealt_longest_first_keeps_the_answer(heads, queries, e):
    """The default tile schedule of causal attention in blocks of 8 queries with the pass off, then on: the
    query-tile dimension goes first, reversed, and the tile interpreter and the kernel simulator give the loop
    interpreter's answer."""
    kv_heads, group = heads
    m = loopgen.attention_module(
        batch=1, kv_heads=kv_heads, group=group, queries=queries, keys=queries, e=e, ev=e, mask="causal"
    )
    run_pipeline(m, "tensor-to-loop")
    reference = interpret(m, seed=5)
    for p in _passes("loop-to-tile"):
        # tiles of 8 queries, the keys not split over blocks (the pass leaves combines across blocks alone)
        forced = {
            "tile-longest-first": "{order=off}",
            "tile-blockify": "{bm=8 threads=8}",
            "tile-split-reduce": "{splits=1}",
        }
        run_pipeline(m, p + forced.get(p, ""))
    (band,) = [lp for lp in m.walk() if isinstance(lp, T.ForOp) and set(lp.bind) & set(T.BLOCK_AXES)]
    slopes = work_slopes(band)
    assert len(slopes) == 1 and next(iter(slopes))[1] > 0, print_module(m)  # the last query tiles are longest
    run_pipeline(m, "tile-longest-first")
    (band,) = [lp for lp in m.walk() if isinstance(lp, T.ForOp) and set(lp.bind) & set(T.BLOCK_AXES)]
    assert work_slopes(band) == {(0, -1)}, print_module(m)
    assert_close(reference, interpret(m, seed=5), m, f"tile:\n{print_module(m)}")
    run_pipeline(m, "tile-to-kernel")
    assert_close(reference, interpret(m, seed=5), m, "kernel simulator")
