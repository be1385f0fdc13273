"""Tensor-core fragments at the tile level: which thread loops compute a contraction on MMA atoms, and how.

A thread loop over a contraction's output tile (rows, cols) is laid out as an MMA accumulator when its layout is
`acc_layout(extents, warps)`: the tile is cut into `warps` warp tiles, each warp's 32 threads take the points the
mma.sync accumulator fragment gives a lane (rows g, g + 8, g + 16, ..., columns 2t, 2t + 1, 2t + 8, ...). That
layout is an ordinary bijection of the loop's points, so the interpreter runs it like any other; the loop's `atom`
attribute (`atom mma.m16n8k16`, `atom wgmma.m64n256k16`) says that the contraction inside is materialized on the
tensor cores, the thread's register tile being its share of the accumulator (a `!kernel.frag` whose lane elements
are exactly that tile, `dialects/kernel/fragments.py`).

    atom = Atom.parse("wgmma.m64n128k16")
    ops = operands(loop, *loop.ivs)  # the factors' loads and math, per carrier; a string says why not
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from irforge.dialects.scalar import CastOp, ConstOp, ScalarMathOp

from irforge.ir import Operation, Value

from ..kernel import fragments as layouts
from ..loop.indexing import IndexValueOp, LoadValueOp
from . import ForOp, LoadOp, ReduceOp, StageOp, enclosing_loops
from .algebra import Contraction, contractions_in
from .layout import Layout
from .vectors import coefficient, expand

HALF = ("f16", "bf16")
_ATOM_RE = re.compile(r"(mma|wgmma)\.m(\d+)n(\d+)k(\d+)")


@dataclass(frozen=True)
class Atom:
    """An MMA instruction shape: `mma.m16n8k16` (a warp, mma.sync) or `wgmma.m64nNk16` (a warpgroup, N from 8 to
    256 in steps of 8)."""

    family: str
    m: int
    n: int
    k: int

    @staticmethod
    def parse(text: str) -> Atom | None:
        got = _ATOM_RE.fullmatch(text)
        if got is None:
            return None
        atom = Atom(got[1], int(got[2]), int(got[3]), int(got[4]))
        if atom.family == "mma" and (atom.m, atom.n, atom.k) != (16, 8, 16):
            return None
        if atom.family == "wgmma" and (atom.m != 64 or atom.k != 16 or atom.n % 8 or not 8 <= atom.n <= 256):
            return None
        return atom

    def __str__(self) -> str:
        return f"{self.family}.m{self.m}n{self.n}k{self.k}"

    @property
    def warps(self) -> int:
        """Warps that issue one instruction together."""
        return 4 if self.family == "wgmma" else 1


ATOM_FORMS = "mma.m16n8k16 or wgmma.m64nNk16 (N a multiple of 8 up to 256)"


# A warp's rows on the top halves of mma atoms (`dialects/kernel/fragments.py`): 8, or down to 4. The fragment's
# rows past the tile's (ghosts) read the tile's last row (`kernel.ldmatrix`'s `rows`, whose clamp holds for tiles
# of half the fragment or more) and store nothing (lower-to-kernel).
TOP_ROWS = tuple(range(layouts.HALF_ROWS // 2, layouts.HALF_ROWS + 1))


def fragment_rows(rows: int) -> int:
    """The rows of the fragment a warp tile of `rows` rows computes in: the atoms' top half (8) for a few rows."""
    return layouts.HALF_ROWS if rows in TOP_ROWS else rows


def acc_layout(extents, warps) -> Layout:
    """The layout that gives each thread its lane's points of an mma accumulator: warp tiles of `extents / warps`,
    each a grid of 16 x 8 atoms (or, for one warp's 4 to 8 rows, their top halves), a lane's rows 8 apart and its
    columns in pairs 8 apart."""
    t0, t1 = (e // w for e, w in zip(extents, warps))
    v0, v1 = max(1, 2 * t0 // 16), max(1, t1 // 4)
    return Layout(tuple(extents), (v0, v1), (v0, max(1, v1 // 2)), 1, tuple(warps))


def why_not_layout(extents, warps, atom: Atom, top: bool = True) -> str | None:
    """Why a loop over `extents` cannot be cut into `warps` warp tiles of `atom`'s accumulator (None when it can);
    `top`: one warp's tile of 4 to 8 rows (`TOP_ROWS`, on the mma atoms' top halves) is allowed."""
    if len(extents) != 2 or len(warps) != 2:
        return "lays out a contraction's output tile of two dimensions (rows, columns) on the tensor cores"
    if any(w < 1 or e % w for e, w in zip(extents, warps)):
        return f"warps {list(warps)} do not divide the tile {list(extents)}"
    t0, t1 = (e // w for e, w in zip(extents, warps))
    top = top and atom.family == "mma" and warps[0] == 1 and t0 in TOP_ROWS  # the atoms' top halves
    if (t0 % 16 and not top) or t1 % 8:
        return (
            f"a warp tile [{t0}, {t1}] is not a grid of 16 x 8 mma atoms (or, for one warp's rows, their top halves: "
            f"{TOP_ROWS[0]} to {TOP_ROWS[-1]} rows)"
        )
    if atom.family == "wgmma":
        if t0 != 16 or warps[0] % 4 or warps[1] != 1:
            return (
                f"wgmma needs warpgroups of 4 warps stacked along the rows, each warp 16 rows: warps [4k, 1] over "
                f"4k x 16 rows, not warps {list(warps)} over {extents[0]}"
            )
        if t1 != atom.n:
            return f"the atom's {atom.n} columns are not the warpgroup's {t1}"
    return None


def wgmma_atom(extents) -> Atom | None:
    """The wgmma atom a tile of `extents` (rows, columns) takes: N its columns (8 to 256, a multiple of 8)."""
    return Atom.parse(f"wgmma.m64n{extents[1]}k16") if len(extents) == 2 else None


# ---- the contraction a tensorized loop computes --------------------------------------------------------------
@dataclass
class Factor:
    """One side of a product: the 16-bit value fed to the atom (`value`, before its cast to the accumulator's
    type), the ops computing it from loads (in program order), and its loads."""

    value: Value
    ops: list[Operation]
    loads: list[LoadValueOp]


@dataclass
class Operands:
    contraction: Contraction
    products: list[tuple[Factor, Factor]]  # per carrier: (rows factor "a", columns factor "b")

    @property
    def dtype(self):
        return self.products[0][0].value.type


def operands(root: Operation, rows: Value, cols: Value, atom_k: int = 16) -> Operands | str:
    """What the contraction under `root` (a thread loop over its output tile, or the band before it is tiled)
    multiplies, per carrier: the factor reaching index `rows` (the atom's A) and the one reaching `cols` (B), or why
    the tensor cores cannot compute it (`products` says what they take)."""
    found = contractions_in(root)
    if len(found) != 1:
        return "holds no contraction" if not found else "holds several contractions"
    c = found[0]
    r = c.reduce
    if r.bind or any(isinstance(x, ReduceOp) and x is not r for x in r.walk()):
        return "its contraction's reduction is distributed or holds loops"
    products = products_of(r, rows, cols, atom_k)
    return products if isinstance(products, str) else Operands(c, products)


def products_of(r: Operation, rows: Value, cols: Value, atom_k: int = 16) -> list[tuple[Factor, Factor]] | str:
    """The (A, B) factors of each carrier of the reduction `r` (of any level: the loop level asks too, before it
    fuses), or why the tensor cores cannot compute them: every product must be `cast(x) * cast(y)` into f32
    carriers with x, y of one 16-bit float type, computed elementwise from loads that each place the row (or
    column) index and the reduction's index along their buffer's last two dimensions, and the reduction must come
    in steps of the atom's k."""
    if r.extents[0] % atom_k:
        return f"its contraction's reduction of {r.extents[0]} is not a multiple of the atom's k = {atom_k}"
    products, used = [], set()
    for y, res in zip(r.yielded, r.results):
        if res.type.name != "f32":
            return f"accumulates in {res.type}; the tensor cores accumulate in f32"
        prod = y.owner
        if not (isinstance(prod, ScalarMathOp) and prod.fn == "mul" and prod.result.type == res.type):
            return "yields something other than a product in f32"
        sides = []
        for x in prod.operands:
            f = _factor(x, r, rows, cols, r.iv)
            if isinstance(f, str):
                return f
            sides.append(f)
        placed = [_side(f, rows, cols) for f in sides]
        if sorted(placed) != ["a", "b"]:
            return "multiplies factors that do not reach the rows and the columns one each"
        a, b = sides if placed[0] == "a" else sides[::-1]
        if a.value.type != b.value.type:
            return f"multiplies {a.value.type} by {b.value.type}; an atom takes one operand type"
        products.append((a, b))
        used |= {id(o) for f in (a, b) for o in f.ops} | {id(prod), id(a.value.owner), id(b.value.owner)}
        used |= {id(x.owner) for x in prod.operands}
    if len({a.value.type for a, _ in products}) > 1:
        return "its carriers multiply different operand types"
    stray = [o for o in r.body.ops[:-1] if id(o) not in used and not isinstance(o, IndexValueOp)]  # [-1]: the yield
    if stray:
        return f"its reduction computes '{stray[0].name}' besides the products"
    return products


def _factor(x: Value, r: ReduceOp, rows: Value, cols: Value, k: Value) -> Factor | str:
    cast = x.owner
    if not (isinstance(cast, CastOp) and cast.operand.type.name in HALF and r.is_ancestor_of(cast)):
        return "multiplies a factor that is not a 16-bit float (f16, bf16) widened to f32"
    value = cast.operand
    ops, loads, todo, seen = [], [], [value], set()
    while todo:
        v = todo.pop()
        op = v.owner
        if id(v) in seen or not isinstance(op, Operation) or not r.is_ancestor_of(op):
            continue  # defined outside the reduction: the same for every element (a scalar broadcast)
        seen.add(id(v))
        if isinstance(op, LoadValueOp):
            why = _placement(op, rows, cols, k)
            if why:
                return why
            loads.append(op)
        elif isinstance(op, (ScalarMathOp, CastOp)) or op.name == "scalar.const":
            if any(u.type.name == "index" for u in op.operands):
                return f"'{op.name}' uses an index as a value in a factor"
            todo.extend(op.operands)
        else:
            return f"a factor is computed by '{op.name}'"
        ops.append(op)
    order = {id(o): i for i, o in enumerate(r.body.ops)}
    ops.sort(key=lambda o: order.get(id(o), -1))
    return Factor(value, ops, loads)


def _placement(load: LoadValueOp, rows: Value, cols: Value, k: Value) -> str | None:
    """Why a load cannot be read as a fragment: its buffer's last dimension and one before it (`rows_dim`: the
    dimensions between stay put, as the unit one of a decode step's queries [b, h, 1, d] does) must be, in either
    order, the reduction's index and one of the tile's indices (each with coefficient 1), and no other dimension
    may move with them."""
    exprs = [expand(e) for e in load.index_exprs()]
    if len(exprs) < 2:
        return "a factor reads a buffer of one dimension"
    free = rows if any(coefficient(e, rows) for e in exprs) else cols
    moving = [d for d, e in enumerate(exprs[:-1]) if coefficient(e, free) != 0 or coefficient(e, k) != 0]
    if len(moving) > 1:
        return "a factor's subscripts move along more than one dimension before the buffer's last"
    last = [exprs[moving[0] if moving else -2], exprs[-1]]
    pairs = [(coefficient(e, free), coefficient(e, k)) for e in last]
    if any(c is None for pair in pairs for c in pair):
        return "a factor's last two subscripts are not linear in the tile's index and the reduction's"
    got = sorted(pairs)
    if got != [(0, 1), (1, 0)]:
        return "a factor's last two subscripts are not the tile's index and the reduction's, once each"
    if any(coefficient(e, rows if free is cols else cols) for e in exprs):
        return "a factor reads both the rows and the columns of the tile"
    return None


def _side(f: Factor, rows: Value, cols: Value) -> str:
    reach = {"a" if any(coefficient(expand(e), rows) for e in ld.index_exprs()) else "b" for ld in f.loads}
    return reach.pop() if len(reach) == 1 else "?"


@dataclass
class AttentionOperands:
    """What an attention-shaped contraction multiplies on the tensor cores: an `online` carrier over keys whose
    element `(x, w_1, ...)` stands for the products `exp(x - m) · w_i` (`algebra.py`), its key `x` computed from a
    contraction of its own (the scores, `c.a_reduction`). The scores' factors (A reaching the rows, B the keys), the
    ops from the scores to `x` (elementwise math on them and on indices: scale, masks), and per weight its factor
    (B of the second product, whose A is the fold's `exp(x - m)`), or None for a constant weight (the `1` of l)."""

    contraction: Contraction
    scores: tuple[Factor, Factor]
    key_ops: list[Operation]
    weights: list[Factor | None]

    @property
    def dtype(self):
        return self.scores[0].value.type


def attention_operands(root: Operation, rows: Value, cols: Value, atom_k: int = 16) -> AttentionOperands | str:
    """The attention-shaped contraction under `root` (a thread loop over its output tile: rows, and the columns of
    the weights), or why the tensor cores cannot compute it: one online carrier whose key a contraction of 16-bit
    factors computes, keys in steps of the atom's k, each weight a 16-bit factor reaching the columns (or a
    constant), the scores and the weights of one type, and the key computed from the scores by elementwise ops on
    them and on indices (a mask read from memory stays on the SIMT path)."""
    found = contractions_in(root)
    # The scores' own reduction may read as a contraction too (over the block's indices, when K is read from
    # memory rather than a staged slab): it is a part of the attention, not a second product.
    scores = {id(c.a_reduction) for c in found if c.a_reduction is not None}
    found = [c for c in found if id(c.reduce) not in scores]
    if len(found) != 1 or found[0].a_reduction is None:
        return "holds no attention-shaped contraction (an online carrier whose key is a contraction)"
    c = found[0]
    r, scores = c.reduce, c.a_reduction
    if r.bind or scores.bind or r.vector > 1:
        return "its reductions are distributed or vectorized"
    if r.extents[0] % atom_k:
        return f"its {r.extents[0]} keys are not a multiple of the atom's k = {atom_k}"
    products = products_of(scores, rows, r.iv, atom_k)
    if isinstance(products, str):
        return f"its scores: {products}"
    if len(products) != 1:
        return "its scores' reduction has several carriers"
    x, *ws = r.yielded
    weights: list[Factor | None] = []
    inside = set()
    for w in ws:
        if isinstance(w.owner, ConstOp):
            weights.append(None)
            continue
        f = _factor(w, r, rows, cols, r.iv)
        if isinstance(f, str):
            return f"a weight: {f}"
        if _side(f, rows, cols) != "b" or any(coefficient(expand(e), rows) for ld in f.loads for e in ld.index_exprs()):
            return "a weight does not reach the columns alone"
        if f.value.type != products[0][0].value.type:
            return f"weighs {f.value.type} values by scores of {products[0][0].value.type}; one atom type takes both"
        weights.append(f)
        inside |= {id(o) for o in f.ops} | {id(w.owner)}
    key_ops = _key_ops(r, scores, x)
    if isinstance(key_ops, str):
        return key_ops
    stray = [
        o
        for o in r.body.ops[:-1]
        if id(o) not in inside and o not in key_ops and o is not scores and not isinstance(o, IndexValueOp)
    ]
    if stray:
        return f"its element computes '{stray[0].name}' besides its key and weights"
    return AttentionOperands(c, products[0], key_ops, weights)


def any_operands(root: Operation, rows: Value, cols: Value, atom_k: int = 16) -> Operands | AttentionOperands | str:
    """The products under `root` as the atoms take them, by their algebra: attention's two (an online carrier whose
    key is a contraction: `attention_operands`), else one contraction's (`operands`)."""
    if any(c.a_reduction is not None for c in contractions_in(root)):
        return attention_operands(root, rows, cols, atom_k)
    return operands(root, rows, cols, atom_k)


def _key_ops(r: ReduceOp, scores: ReduceOp, x: Value) -> list[Operation] | str:
    """The ops of `r`'s element computing its key `x` from the scores (in program order), or why the tensor-core
    fold cannot compute them lane by lane on the scores' fragment."""
    ops, todo, seen = [], [x], set()
    while todo:
        v = todo.pop()
        op = v.owner
        if id(v) in seen or not isinstance(op, Operation) or not r.is_ancestor_of(op) or op is scores:
            continue
        seen.add(id(v))
        if isinstance(op, LoadValueOp):
            return "its key reads memory (a mask): the tensor-core fold computes keys from the scores and indices"
        if not isinstance(op, (ScalarMathOp, CastOp, ConstOp, IndexValueOp)):
            return f"its key is computed by '{op.name}'"
        ops.append(op)
        todo.extend(op.operands)
    order = {id(o): i for i, o in enumerate(r.body.ops)}
    return sorted(ops, key=lambda o: order[id(o)])


def why_not_descriptors(ops: Operands) -> str | None:
    """Why wgmma cannot read the factors of `ops` from shared memory through descriptors (None when it can): each
    must be one load, widened and nothing else (the tensor cores read the tile as it is), with the reduction's index
    along its buffer's last dimension (K-major, as nn.Linear keeps both its input and its weight)."""
    k = ops.contraction.reduce.iv
    for a, b in ops.products:
        for f in (a, b):
            if len(f.ops) != 1 or len(f.loads) != 1:
                return "a factor is computed from its loads (a prologue); wgmma reads shared-memory tiles as they are"
            if k_dim(f.loads[0], k) != -1:
                return "a factor's reduction index runs down its buffer's rows (wgmma reads K-major tiles here)"
    return None


def why_not_attention_descriptors(ops: AttentionOperands) -> str | None:
    """Why wgmma cannot read attention's K and V from shared memory through descriptors (None when it can): each
    must be one load, widened and nothing else, K with the head dimension along its buffer's last dimension (K-major
    for the scores), V with the keys down its rows (MN-major for the second product). Q and exp(x - m) reach the
    products from registers."""
    parts = [(ops.scores[1], ops.contraction.a_reduction.iv, -1)]
    parts += [(w, ops.contraction.reduce.iv, -2) for w in ops.weights if w is not None]
    for f, k, along in parts:
        if len(f.ops) != 1 or len(f.loads) != 1:
            return "K or V is computed from its loads (a prologue); wgmma reads shared-memory tiles as they are"
        if k_dim(f.loads[0], k) != along:
            return "K's head dimension is not along its buffer's rows, or V's keys not down them (wgmma's layouts)"
    return None


def descriptor_factors(loop: ForOp) -> list[Factor]:
    """The factors a loop laid out on a wgmma atom has wgmma read through descriptors: both of a contraction's,
    attention's K and V (its Q and exp(x - m) come from registers); none where a descriptor cannot read them."""
    atom = Atom.parse(loop.attributes.get("atom", ""))
    if atom is None or atom.family != "wgmma":
        return []
    ops = any_operands(loop, *loop.ivs)
    if isinstance(ops, AttentionOperands):
        return [] if why_not_attention_descriptors(ops) else [ops.scores[1], *(w for w in ops.weights if w is not None)]
    if isinstance(ops, str) or why_not_descriptors(ops):
        return []
    return [f for a, b in ops.products for f in (a, b)]


def descriptor_stages(root: Operation, copied: bool = False) -> list:
    """The stages under `root` whose boxes a wgmma reads through descriptors: the sources of the loads of
    `descriptor_factors` of every loop laid out on a wgmma atom (`copied`: of the loops whose every such factor the
    tensor memory accelerator copies; a factor the threads copy leaves its loop on mma.sync)."""
    out = []
    for loop in (lp for lp in root.walk() if isinstance(lp, ForOp) and "atom" in lp.attributes):
        sources = [ld.operands[0].owner for f in descriptor_factors(loop) for ld in f.loads]
        if copied and not all(isinstance(st, StageOp) and st.copy == "tma" for st in sources):
            continue
        out += [st for st in sources if isinstance(st, StageOp)]
    return list(dict.fromkeys(out))


def rows_dim(load: LoadOp, ivs) -> int:
    """The dimension (negative) of a factor's load that its memory rows run along: the one before the last that
    one of `ivs` (the tile's indices, the reduction's) moves along (`_placement`), -2 where none does."""
    exprs = [expand(e) for e in load.index_exprs()]
    moving = [d - len(exprs) for d, e in enumerate(exprs[:-1]) if any(coefficient(e, v) for v in ivs)]
    return moving[0] if moving else -2


def k_dim(load: LoadOp, k: Value) -> int:
    """Where a factor's load moves along the reduction's index: -1 along its last dimension, else -2 (along its
    memory rows, `rows_dim`)."""
    return -1 if coefficient(expand(load.index_exprs()[-1]), k) else -2


def folds_chunks(r: ReduceOp) -> bool:
    """Whether `r` is the keys' reduction of attention laid out on atoms: lower-to-kernel folds its keys a chunk at
    a time on the atoms (`passes/tile_to_kernel/flash.py`), so it is chunked even into one chunk (the chunk is the
    fold's unit, its K and V slabs staged outside it)."""
    loop = next((lp for lp in enclosing_loops(r) if "atom" in lp.attributes), None)
    if loop is None or len(loop.ivs) != 2:
        return False
    ops = attention_operands(loop, *loop.ivs, 1)
    return not isinstance(ops, str) and ops.contraction.reduce is r


def atom_step(r: ReduceOp) -> int:
    """The k of the atom `r` is computed on when it is the contraction of a loop laid out on one (its trips must
    come in whole atom steps: a pass that splits it keeps the pieces multiples of it), else 1."""
    loop = next((lp for lp in enclosing_loops(r) if "atom" in lp.attributes), None)
    if loop is None or len(loop.ivs) != 2:
        return 1
    atom = Atom.parse(loop.attributes["atom"])
    ops = any_operands(loop, *loop.ivs, 1)
    return atom.k if atom is not None and not isinstance(ops, str) and ops.contraction.reduce is r else 1
