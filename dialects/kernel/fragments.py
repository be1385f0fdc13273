"""Tensor-core fragment layouts: which element of a warp's tile each lane holds, for `mma.sync`.

One table serves the simulator (which gathers the tile from the 32 lanes and scatters the result back) and the CUDA
emitter (which loads and stores each lane's elements), so the two cannot disagree. For a lane `l`, with
`g = l // 4` (the group) and `t = l % 4` (the thread in the group), element `j` of a lane's fragment sits at
`(row, col) = FRAGMENT_LAYOUTS[(role, shape)][j](g, t)` of the tile, as PTX's ISA defines for m16n8k16:

- "a" (16 x 16, row-major M x K), 8 elements: pairs at (g, 2t), (g + 8, 2t), (g, 2t + 8), (g + 8, 2t + 8)
- "b" (16 x 8, K x N), 4 elements: pairs at (2t, g), (2t + 8, g) along K
- "acc" (16 x 8, M x N, the C and D operands), 4 elements: pairs at (g, 2t), (g + 8, 2t)
"""

from __future__ import annotations


def _pairs(*bases):
    """Element j = 2 * k + e of a lane: pair k starts at bases[k](g, t); e steps along the pair's axis."""
    out = []
    for base, axis in bases:
        for e in range(2):
            out.append(lambda g, t, base=base, axis=axis, e=e: _step(base(g, t), axis, e))
    return tuple(out)


def _step(rc, axis, e):
    r, c = rc
    return (r + e, c) if axis == 0 else (r, c + e)


FRAGMENT_LAYOUTS = {
    ("a", (16, 16)): _pairs(
        (lambda g, t: (g, 2 * t), 1),
        (lambda g, t: (g + 8, 2 * t), 1),
        (lambda g, t: (g, 2 * t + 8), 1),
        (lambda g, t: (g + 8, 2 * t + 8), 1),
    ),
    ("b", (16, 8)): _pairs(
        (lambda g, t: (2 * t, g), 0),
        (lambda g, t: (2 * t + 8, g), 0),
    ),
    ("acc", (16, 8)): _pairs(
        (lambda g, t: (g, 2 * t), 1),
        (lambda g, t: (g + 8, 2 * t), 1),
    ),
}

# The mma shape each (a, b, acc) combination implements, as PTX spells it.
MMA_SHAPES = {((16, 16), (16, 8), (16, 8)): "m16n8k16"}


def lane_coords(role: str, shape: tuple, lane: int) -> list[tuple[int, int]]:
    """(row, col) in the tile of each element lane `lane` holds."""
    g, t = lane // 4, lane % 4
    return [f(g, t) for f in FRAGMENT_LAYOUTS[(role, shape)]]
