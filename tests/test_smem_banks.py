"""The shared-memory bank model (passes/tile/banks.py) against counts made by hand: single warp instructions under
the rules of its docstring, then whole stages (their reads as lower-to-kernel issues them, and their copy)."""

from __future__ import annotations

import numpy as np
import pytest
from irforge.dialects import tile as T
from irforge.passes.tile import banks, banks_layouts

from irforge.parser import parse_module

LANES = np.arange(32)


@pytest.mark.parametrize(
    "addrs, nbytes, active, expected",
    [
        (LANES * 4, 4, None, (1, 1)),  # consecutive words: one per bank
        (LANES * 8, 4, None, (2, 1)),  # every other word: banks 0, 2, ..., 30 twice
        (LANES * 128, 4, None, (32, 1)),  # a column of a 32-word-wide array: all in bank 0
        (np.zeros(32, int), 4, None, (1, 1)),  # one word for every thread: a broadcast
        (LANES // 2 * 4, 4, None, (1, 1)),  # pairs share a word
        (LANES * 16, 16, None, (4, 4)),  # 16-byte vectors, consecutive: a wavefront per quarter warp
        (LANES * 32, 16, None, (8, 4)),  # 16-byte vectors 32 bytes apart: a quarter's 8 span 256 bytes, 2 each
        (LANES * 8, 8, None, (2, 2)),  # 8-byte vectors, consecutive: a wavefront per half warp
        (LANES * 16, 8, None, (4, 2)),  # 8-byte vectors 16 bytes apart: a half's 16 span 256 bytes, 2 each
        (LANES * 128, 4, LANES < 16, (16, 1)),  # half the warp asks: 16 words in bank 0
        (LANES, 1, None, (1, 1)),  # bytes: 8 words
        (LANES * 2, 2, None, (1, 1)),  # halves: 16 words
        (np.array([0, 128, 4]), 4, None, (2, 1)),  # a partial warp: words 0 and 32 meet in bank 0
        (np.array([12, 144]), 16, None, (2, 1)),  # unaligned 16-byte pieces (words 3-6, 36-39): banks 4-6 twice
    ],
)
def test_wavefronts_of_one_instruction(addrs, nbytes, active, expected):
    wf, ideal = banks.wavefronts(addrs, nbytes, active)
    assert (int(wf[0]), int(ideal[0])) == expected


def test_wavefronts_of_several_instructions_at_once():
    rows = np.stack([LANES * 4, LANES * 128, LANES * 8])
    wf, ideal = banks.wavefronts(rows, 4)
    assert wf.tolist() == [1, 32, 2] and ideal.tolist() == [1, 1, 1]


def row_reads(cols: int, vector: int = 4) -> str:
    """One warp; thread t reads row t of a [32, cols] f32 box, `vector` columns a trip."""
    return f"""func.func @f(%x: f32[32,{cols}]) -> f32[32,{cols}] {{
  %y = tile.buffer f32[32,{cols}]
  tile.kernel @k grid(1) block(32) {{
    %s = tile.stage %x[0, 0] -> smem : f32[32,{cols}]
    tile.for %t in 0..32 by threadIdx.x {{
      tile.for %k in 0..{cols} vector {vector} {{
        %v = tile.load %s[%t, %k]
        tile.store %y[%t, %k] = %v
      }}
    }}
  }}
  func.return %y
}}
"""


ROWS = row_reads(8)  # 16 bytes a trip, 2 trips


def _stage(text: str) -> T.StageOp:
    return next(op for op in parse_module(text).walk() if isinstance(op, T.StageOp))


def _cost(text: str, **layout) -> banks.Cost:
    st = _stage(text)
    with banks_layouts.trying(st, layout):
        return banks.stage_cost(st)


def test_rows_of_32_bytes_meet_every_fourth_row():
    # Reads: a quarter warp's 8 rows start 32 bytes apart (banks 0-3, 8-11, 16-19, 24-27, then 0-3 again): 2
    # wavefronts a quarter, 8 a request, 2 requests. The copy: thread t writes elements 4t.. (then 128 + 4t..):
    # consecutive 16-byte pieces, 4 wavefronts a request, 2 requests.
    c = _cost(ROWS)
    assert (c.wavefronts, c.ideal, c.requests) == (2 * 8 + 2 * 4, 2 * 4 + 2 * 4, 4)
    assert c.widths == (("%v", 16), ("the copy", 16))


def test_a_swizzle_of_the_row_bit_above_the_quarter_removes_the_conflict():
    # swizzle(1, 2, 3): the 16-byte unit index's bit 0 XOR offset bit 5 (row bit 2): rows 4-7 of a quarter read
    # their other unit, banks 4-7, 12-15, ...: 1 wavefront a quarter. The copy writes each 128 bytes permuted.
    c = _cost(ROWS, swizzle=(1, 2, 3))
    assert (c.wavefronts, c.ideal) == (2 * 4 + 2 * 4, 16)


def test_a_pad_moves_the_conflict_into_the_copy():
    # pad 4: rows of 48 bytes, a quarter's reads land in disjoint banks (0, 12, 24, 4, 16, 28, 8, 20): 4 a
    # request. The copy's quarter (rows 0-3, two pieces each) now meets in banks 4-7 (bytes 16 and 144): 2 a
    # quarter, 8 a request.
    c = _cost(ROWS, pad=4)
    assert (c.wavefronts, c.ideal) == (2 * 4 + 2 * 8, 16)


def test_a_pad_of_one_narrows_the_vectors():
    st = _stage(ROWS)
    c = banks_layouts.evaluate(st, {"pad": 1}, banks.stage_cost(st))
    assert c.why_not == "narrows %v from 16- to 4-byte vectors"


# A contraction block's A slab: 128 threads in 4 x 8 warps (raster 4) of 8 x 8 register tiles; a thread reads 8
# rows of 4 k-values (16 bytes) from rows 8 apart of a [64, 8] f32 box, BK = 8 in 2 steps.
A_SLAB = """func.func @forward(%x: f32[64,64], %w: f32[64,128]) -> f32[64,128] {
  %y = tile.buffer f32[64,128]
  tile.kernel @k grid(1) block(128) {
    tile.for %pa0, %pa1 in 0..64, 0..128 by threadIdx.x vector [8, 8] split [1, 2] raster 4 {
      %s = tile.reduce %r in 0..8 add(0.0) -> f32 {
        %x_smem = tile.stage %x[0, %r * 8] -> smem : f32[64,8]
        %c = tile.reduce %r_i in 0..8 vector 4 add(0.0) -> f32 {
          %a = tile.load %x_smem[%pa0, %r_i]
          %b = tile.load %w[%r * 8 + %r_i, %pa1]
          %p = scalar.mul %a, %b : f32
          tile.yield %p
        }
        tile.yield %c
      }
      tile.store %y[%pa0, %pa1] = %s
    }
  }
  func.return %y
}
"""


def test_a_register_tiled_slab_reads_four_rows_per_quarter_into_one_bank_group():
    # A quarter warp is threads (rows of tiles) 0-3 of two columns: rows 0, 8, 16, 24 of the box (256 bytes
    # apart: banks 0-3 each), the other column's threads the same words (broadcast): 4 wavefronts a quarter, 16 a
    # request. 8 row loads x 2 steps x 4 warps = 64 requests; the copy, 512 elements in one 16-byte piece per
    # thread, 4 requests of 4.
    c = _cost(A_SLAB)
    assert (c.wavefronts, c.requests) == (64 * 16 + 4 * 4, 68)
    assert c.ideal == 64 * 4 + 4 * 4


def test_swizzling_the_tile_row_bits_into_the_units_clears_it():
    # swizzle(2, 2, 4): units of 4 (16 bytes) XOR offset bits 6-7, which are rows 8 and 16 apart: rows 0, 8, 16,
    # 24 read units 0, 1, 2, 3 of their rows, banks 0-3, 4-7, 8-11, 12-15.
    assert _cost(A_SLAB, swizzle=(2, 2, 4)).wavefronts == 64 * 4 + 4 * 4
    # swizzle(1, 2, 3) flips on row bit 2 only: rows 0, 8, 16, 24 all keep unit 0.
    assert _cost(A_SLAB, swizzle=(1, 2, 3)).wavefronts == 64 * 16 + 4 * 4


def test_choose_keeps_a_conflict_free_layout_without_trying_others():
    st = _stage(ROWS)
    with banks_layouts.trying(st, {"swizzle": (1, 2, 3)}):
        current, best, tried = banks_layouts.choose(st, [{"pad": 4}])
    assert best is current and tried == []


def test_trying_restores_the_stage():
    st = _stage(ROWS)
    with banks_layouts.trying(st, {"pad": 4, "swizzle": (1, 2, 3), "copy": "async"}):
        assert st.attributes["pad"] == 4 and st.copy == "async"
    assert "pad" not in st.attributes and "swizzle" not in st.attributes and st.copy == "sync"


def test_slabs_of_a_contraction_on_mma_atoms_are_weighed_as_ldmatrix_reads():
    """A K slab attention reads on mma atoms (rows of 64 bf16, 128 bytes): ldmatrix serves each 8 x 8 matrix in one
    phase, 8 lanes each giving a 16-byte row. Dense, the 8 rows of a matrix start 128 bytes apart, all in the same
    4 banks: 8 wavefronts a phase, 32 an x4 instruction where 4 would do. The copy engine's 128-byte swizzle (XOR of
    the row's 16-byte unit with its row index mod 8) puts the 8 rows in 8 different units: 4. (`atom=mma`: on
    sm_90a this attention runs on wgmma by default, which reads K through a descriptor in that swizzle.)"""
    import sys

    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import loopgen

    from irforge.pass_manager import run_pipeline
    from irforge.registry import registry
    from irforge.types import bf16

    m = loopgen.attention_module(batch=1, kv_heads=1, group=1, queries=64, keys=256, e=64, ev=64, dtype=bf16)
    loop_to_tile = "".join(ln.split("#")[0].strip() for ln in registry().pipelines()["loop-to-tile"].text.splitlines())
    run_pipeline(m, "tensor-to-loop," + loop_to_tile.replace("tile-tensorize", "tile-tensorize{atom=mma}"))
    assert any(lp.attributes.get("atom") == "mma.m16n8k16" for lp in m.walk() if isinstance(lp, T.ForOp))
    (k,) = [s for s in m.walk() if isinstance(s, T.StageOp) and s.operands[0].name_hint == "k"]
    assert k.attributes["swizzle"] == (3, 3, 3)
    assert banks.stage_cost(k).per_request == 4.0
    del k.attributes["swizzle"]
    assert banks.stage_cost(k).per_request == 32.0
