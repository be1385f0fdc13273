"""One swizzle per register-tile access of swizzled shared memory, instead of one per run.

A swizzle (B, M, S) maps offset `o` to `o ^ (((o >> (M + S)) & (2^B - 1)) << M)`: it is linear over XOR, so
`swz(a ^ c) == swz(a) ^ swz(c)`. A register tile's runs sit at constant offsets `c` from lane 0's offset `a`;
where no bit `a` may have is set in any `c`, `a + c == a ^ c`, and run `c`'s address is `swz(a) ^ swz(c)`: one
swizzle of `a` a thread computes once and a constant for each run, where swizzling every run's sum costs address
registers for each (an f32 product of a K-major weight, 8 runs of 4 elements a step, went from 166 registers to
129 and stopped spilling under ptxas' occupancy target). `xor_runs` proves it from the bits each index may have.
"""

from __future__ import annotations

from irforge.dialects.kernel import ops as K
from irforge.dialects.loop.indexing import LoopBase, ValueDim
from irforge.dialects.tile import vectors

from irforge import index_expr as ix
from irforge.ir import BlockArgument
from irforge.types import TensorType


def _span(step: int, top: int) -> int:
    """The bits a multiple of `step` from 0 to `top` may have."""
    if top <= 0:
        return 0
    low = (step & -step).bit_length() - 1  # a multiple of step has at least step's trailing zeros
    return ((1 << top.bit_length()) - 1) & ~((1 << low) - 1)


def _sum(a: int, b: int) -> int:
    """Bits of x + y, x with bits in `a`, y in `b`: no carry where they share none, else up to their largest sum."""
    if a & b == 0:
        return a | b
    low = min((a & -a).bit_length(), (b & -b).bit_length()) - 1
    return _span(1 << low, a + b)  # a and b are also the largest values they spell


def _leaf_bits(v, lanes) -> int | None:
    """Bits the index `v` (a loop index; lane 0's along a lane dimension) may have; None when unknown."""
    if not isinstance(v, BlockArgument) or not isinstance(v.block.parent_op, LoopBase):
        return None
    loop, d = v.block.parent_op, v.index
    extent = loop.extents[d]
    lane = next((ld for ld in lanes if ld.iv is v), None)
    if lane is None:
        return _span(1, extent - 1)
    layout = lane.loop.layout
    tile, run = layout.tile_extents[d], layout.groups_len[d]
    # lane 0 of a work item: its tile's first index (a multiple of the tile) plus a multiple of its group's length
    # inside the tile's first lane group
    return _sum(_span(tile, extent - tile), _span(run, layout.group_stride(d) - run))


def possible_bits(e: ix.IndexExpr, lanes) -> int | None:
    """Bits `e` (an index expression over tile values) may have for any value of its leaves; None when unknown (a
    negative constant, a subtraction, a division)."""
    if isinstance(e, ix.Const):
        return e.value if e.value >= 0 else None
    if isinstance(e, ValueDim):
        return _leaf_bits(e.value, lanes)
    if isinstance(e, ix.Add):
        a, b = possible_bits(e.lhs, lanes), possible_bits(e.rhs, lanes)
        return None if a is None or b is None else _sum(a, b)
    if isinstance(e, ix.Mul):
        for c, x in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if isinstance(c, ix.Const) and c.value >= 0:
                bits = possible_bits(x, lanes)
                if bits is None or c.value & (c.value - 1) == 0:  # a power of two (or zero) moves the bits
                    return None if bits is None else bits * c.value
                return _span(c.value * (bits & -bits), c.value * bits) if bits else 0
    return None


def xor_runs(offset: ix.IndexExpr, shape, strides, width, dtype, lanes, slot: tuple[int, int] | None) -> bool:
    """Whether every run of a tile access (`shape`, `strides`, `width`: `memory_access.Pattern`'s) at lane 0's `offset`
    in a swizzled memory may be addressed as `swz(offset) ^ swz(c)`: no run offset `c` shares a bit with what
    `offset` may have. `slot`: (ring, elements a slot) when the memory is a ring, whose slot term the swizzle sees
    too."""
    _, runs = K.access_runs(TensorType(dtype, shape), strides, width)
    if len(runs) < 2:
        return False
    bits = possible_bits(vectors.expand(offset), lanes)
    if bits is None:
        return False
    if slot is not None:
        ring, size = slot
        bits = _sum(bits, _span(size, (ring - 1) * size) if ring > 1 else 0)
    return all(c >= 0 and c & bits == 0 for c, _ in runs)
