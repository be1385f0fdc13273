"""Tensor-core fragment layouts: which element of a warp's (or warpgroup's) tile each lane holds.

One table serves the simulator (which gathers a tile from the lanes and scatters results back), the CUDA emitter
(which addresses each lane's elements) and the tile level (whose thread loops lay a contraction's points out the
same way), so none of them can disagree. A fragment type names a role ("a", "b" or "acc"), an element type, a tile
shape and a layout family:

- "mma" (`mma.sync.m16n8k16`), one warp's tile: a grid of atoms "a" 16 x 16 (M x K), "b" 16 x 8 (K x N),
  "acc" 16 x 8 (M x N). With `g = lane / 4`, `t = lane % 4`, an atom's lane holds, as PTX's ISA defines:
  - "a", 8 elements: pairs at (g, 2t), (g + 8, 2t), (g, 2t + 8), (g + 8, 2t + 8), each along a row;
  - "b", 4 elements: pairs at (2t, g), (2t + 8, g), each down a column;
  - "acc", 4 elements: (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1).
- an "a" or "acc" tile of 8 rows is the top half of its atoms (a decode step's few query rows): the lane holds
  the elements above whose row is `g` (4 of "a", 2 of "acc"); the instruction reads zeros for rows 8-15 of A and
  its results there are dropped.
- "wgmma" (`wgmma.mma_async` m64nNk16), a warpgroup's tiles of 64 rows: warp w of the group holds rows
  16w .. 16w + 15, of an accumulator [64, N] in the "acc" layout above repeated every 8 columns, of an "a" operand
  [64, 16] (A from registers: its B stays in shared memory) in the "a" layout above.

Element order in a lane: operands ("a", "b") atom after atom (row-major over the atoms), each in PTX's register
order; accumulators row-major over the lane's rows and columns (sorted), which is PTX's order for one atom and the
order of the register tile a tile loop laid out as `vector [2 * rows / 16, 2 * cols / 8] split [..] warps [..]`
gives the thread (docs/dialects/tile.md): an accumulator *is* that register tile, reshaped.
"""

from __future__ import annotations

# family: {role: atom shape}
ATOMS = {
    "mma": {"a": (16, 16), "b": (16, 8), "acc": (16, 8)},
    "wgmma": {"a": (64, 16), "acc": (64, 8)},
}
# The threads sharing one fragment.
THREADS = {"mma": 32, "wgmma": 128}


def _pairs(*bases):
    """Element j = 2 * k + e of an atom: pair k starts at bases[k](g, t); e steps along the pair's axis."""
    out = []
    for base, axis in bases:
        for e in range(2):
            out.append(lambda g, t, base=base, axis=axis, e=e: _step(base(g, t), axis, e))
    return tuple(out)


def _step(rc, axis, e):
    r, c = rc
    return (r + e, c) if axis == 0 else (r, c + e)


# An operand atom's elements in PTX's register order: (row, col) from (g, t).
OPERAND_ATOMS = {
    ("mma", "a"): _pairs(
        (lambda g, t: (g, 2 * t), 1),
        (lambda g, t: (g + 8, 2 * t), 1),
        (lambda g, t: (g, 2 * t + 8), 1),
        (lambda g, t: (g + 8, 2 * t + 8), 1),
    ),
    ("mma", "b"): _pairs(
        (lambda g, t: (2 * t, g), 0),
        (lambda g, t: (2 * t + 8, g), 0),
    ),
}


HALF_ROWS = 8  # an mma "a" or "acc" tile of this many rows is its atoms' top half


def half(family: str, role: str, shape) -> bool:
    """Whether the tile is the top half of its mma atoms (8 rows of "a" or "acc")."""
    return family == "mma" and role in ("a", "acc") and shape[0] == HALF_ROWS


def _acc_rows(family: str, g, w, top: bool = False) -> list:
    """An accumulator atom's rows in a lane (sorted); `w` is the warp's index in its warpgroup; `top`: the atom's
    top half only."""
    base = g if family == "mma" else w * 16 + g
    return [base] if top else [base, base + 8]


def _acc_cols(t) -> list:
    return [2 * t, 2 * t + 1]


def why_not(family: str, role: str, shape) -> str | None:
    """Why (family, role, shape) is no fragment (None when it is)."""
    atoms = ATOMS.get(family)
    if atoms is None:
        return f"no fragment layout family {family!r}; the families are {', '.join(ATOMS)}"
    atom = atoms.get(role)
    if atom is None:
        return f"the {family} layout has no {role!r} fragments; its roles are {', '.join(atoms)}"
    if len(shape) == 2 and half(family, role, shape) and shape[1] % atom[1] == 0:
        return None
    if len(shape) != 2 or shape[0] % atom[0] or shape[1] % atom[1] or min(shape) <= 0:
        top = f" (or {HALF_ROWS} rows: the atoms' top half)" if family == "mma" and role != "b" else ""
        return f"a {family} {role!r} fragment's shape is a multiple of {list(atom)}{top}, got {list(shape)}"
    if family == "wgmma" and shape[0] != atom[0]:
        return f"a wgmma {role!r} fragment is a warpgroup's 64 rows, got {list(shape)}"
    return None


def per_lane(family: str, role: str, shape) -> int:
    return len(points(family, role, shape, 0, 0))


def points(family: str, role: str, shape, g, t, w=0) -> list[tuple]:
    """(row, col) in the tile of each element of the lane with coordinates `g` (lane / 4), `t` (lane % 4) in warp
    `w` of its warpgroup, in element order. Works on ints, numpy arrays and index expressions alike."""
    ar, ac = ATOMS[family][role]
    top = half(family, role, shape)
    atoms_down = 1 if top else shape[0] // ar
    if role == "acc":
        rows = [i * ar + r for i in range(atoms_down) for r in _acc_rows(family, g, w, top)]
        cols = [j * ac + c for j in range(shape[1] // ac) for c in _acc_cols(t)]
        return [(r, c) for r in rows for c in cols]
    # a warpgroup's "a": each warp's 16 rows in mma's "a" layout
    pairs = OPERAND_ATOMS[("mma", role)]
    base = w * 16 if family == "wgmma" else 0
    if top:  # the pairs on row g: the first and third
        pairs = pairs[0:2] + pairs[4:6]
    out = []
    for i in range(atoms_down):
        for j in range(shape[1] // ac):
            for f in pairs:
                r, c = f(g, t)
                out.append((r + base + i * ar, c + j * ac))
    return out


def acc_element(shape, ai: int, aj: int, k: int, family: str = "mma") -> int:
    """The lane's element index of element k (PTX order: 2 * h + e) of the accumulator atom at (ai, aj); a top
    half's atoms have elements 0 and 1 only."""
    cols = 2 * (shape[1] // ATOMS[family]["acc"][1])
    rows_per_atom = 1 if half(family, "acc", shape) else 2
    return (rows_per_atom * ai + k // 2) * cols + 2 * aj + k % 2


def operand_matrices(role: str, shape) -> list[tuple[int, int]]:
    """The 8 x 8 matrices of an "a" or "b" mma fragment in register order (each a pair of elements per lane, as
    `ldmatrix` delivers them): their first (row, col) in the tile."""
    ar, ac = ATOMS["mma"][role]
    if half("mma", role, shape):
        return [(0, j * ac + c) for j in range(shape[1] // ac) for c in (0, 8)]
    inner = [(0, 0), (8, 0), (0, 8), (8, 8)] if role == "a" else [(0, 0), (8, 0)]
    return [(i * ar + r, j * ac + c) for i in range(shape[0] // ar) for j in range(shape[1] // ac) for r, c in inner]
