"""Contractions the tile level would compute on the tensor cores, read off loop kernels, so fusion keeps them there.

`tile-tensorize` puts a contraction on MMA atoms when each product is two 16-bit floats widened to f32, read by
loads that place the reduced index and one output index along their buffer's last two dimensions
(`fragments.products_of`, the rule the tile level applies), and when every access in the loops around it follows
the accumulator's lanes: linear in the output indices, never addressed by a value computed from them (the epilogue
rule of `vectors.why_not`). A fusion can break either -- a transpose inlined into a factor's load, a scatter's
computed row or a rotate-half read put in the contraction's loop nest -- and trade a pass over a buffer for a
product 20-50x slower on the SIMT path. A factor read from memory in 16 bits also stays read so in a product not on
the tensor cores yet: attention's P @ V reaches them at the tile level, once its scores fold online, only if V is
loaded (a V projection's bias fused into it kept Qwen2's prefill attention on the SIMT path). The fusion passes
ask `why_lost` and refuse such a fusion.

Only products with a 16-bit factor and at least TENSOR_MIN_ROWS rows and columns count: the tile level leaves
smaller ones (decode's GEMVs) on the SIMT path anyway, and f32 products never reach the tensor cores, so the
prologue and epilogue fusions around them are decided by work alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from irforge.dialects.loop import ForOp, ReduceOp
from irforge.dialects.loop.indexing import LoadValueOp, LoopBase, ValueDim, enclosing_loops, leaves
from irforge.dialects.loop.transforms import captured_values
from irforge.dialects.scalar import CastOp, ScalarMathOp
from irforge.dialects.tile.fragments import HALF, products_of
from irforge.dialects.tile.vectors import why_not_follow
from irforge.passes.tile.heuristics import TENSOR_MIN_ROWS

from irforge.ir import Operation, Value


@dataclass
class Product:
    """A contraction of 16-bit floats large enough for the tensor cores, and why the tile level would keep it off
    them (None: it would take it)."""

    reduce: ReduceOp
    shape: tuple[int, int, int]  # rows (M), columns (N), reduced (K)
    dtype: str
    why_not: str | None
    loaded: int  # 16-bit factors, over all carriers, read from memory as stored or converted by casts

    @property
    def flops(self) -> int:
        """Multiply-adds, all carriers together (k and v projections merged into one loop are two products)."""
        return math.prod(self.shape) * len(self.reduce.results)

    @property
    def loaded_flops(self) -> int:
        """Multiply-adds times the 16-bit factors of each read from memory (`loaded`)."""
        return math.prod(self.shape) * self.loaded

    def describe(self) -> str:
        m, n, k = self.shape
        return f"the {m} x {n} x {k} contraction of {self.dtype} factors"


def products(root: Operation) -> list[Product]:
    """The contractions under `root` that the tensor cores could compute, each with why they would not."""
    return [p for r in root.walk() if isinstance(r, ReduceOp) for p in [_product(r)] if p is not None]


def why_lost(before: list[Operation], after: list[Operation]) -> str | None:
    """Why the kernels `after` (a fusion of the kernels `before`) compute less of their contractions on the tensor
    cores than `before` did (in multiply-adds), naming one that the fusion takes off them, or read fewer of their
    16-bit factors from memory as they are (multiply-adds times such factors); None when neither."""
    on_before = sum(p.flops for k in before for p in products(k) if p.why_not is None)
    got = [p for k in after for p in products(k)]
    if sum(p.flops for p in got if p.why_not is None) < on_before:
        off = next((p for p in got if p.why_not is not None), None)
        if off is None:
            return "it would leave a contraction of 16-bit floats no longer recognizable for the tensor cores"
        return f"it would take {off.describe()} off the tensor cores: {off.why_not}"
    if sum(p.loaded_flops for p in got) < sum(p.loaded_flops for k in before for p in products(k)):
        lost = min(got, key=lambda p: p.loaded_flops, default=None)
        return f"it would compute a 16-bit factor of {lost.describe() if lost else 'a contraction'} in its loop"
    return None


def _product(r: ReduceOp) -> Product | None:
    if any(m.name != "add" for m, _, _ in r.carriers):
        return None
    pairs = []
    for y in r.yielded:
        prod = y.owner
        if not (isinstance(prod, ScalarMathOp) and prod.fn == "mul"):
            return None
        if not any(_half(x) for x in prod.operands):
            return None
        pairs.append(prod.operands)
    outputs = _output_indices(r, pairs[0])
    if outputs is None:
        return None
    rows, cols = outputs
    m, n = (math.prod(_extent(iv) for iv in side) for side in (rows, cols))
    if min(m, n) < TENSOR_MIN_ROWS:
        return None
    dtype = next(x for x in pairs[0] if _half(x)).owner.operand.type.name
    both = all(_half(x) for pair in pairs for x in pair)
    # a product of two 16-bit factors stages a converted load (a cast from f32) as its tile; attention's P @ V,
    # whose P the fold computes, takes V only as a 16-bit buffer's tile
    read = _read if both else lambda v: isinstance(v.owner, LoadValueOp)
    loaded = sum(_half(x) and read(x.owner.operand) for pair in pairs for x in pair)
    why = _why_not(r, rows, cols) if both else "a factor is not 16-bit"
    return Product(r, (m, n, r.extent), dtype, why, loaded)


def _read(v: Value) -> bool:
    """Whether `v` is an element read from memory, as stored or converted by casts."""
    while isinstance(v.owner, CastOp):
        v = v.owner.operand
    return isinstance(v.owner, LoadValueOp)


def _half(x: Value) -> bool:
    """Whether a factor is a 16-bit float widened to f32."""
    return isinstance(x.owner, CastOp) and x.owner.operand.type.name in HALF


def _extent(iv: Value) -> int:
    return iv.block.parent_op.extent


def _output_indices(r: ReduceOp, factors) -> tuple[list[Value], list[Value]] | None:
    """The free loop indices only the first factor's loads use (the rows) and only the second's (the columns),
    outermost first; None when either is empty (no contraction over two output dimensions)."""
    free = [lp.iv for lp in enclosing_loops(r) if isinstance(lp, ForOp)]
    used = [_indices(_loads(x, r)) for x in factors]
    rows = [iv for iv in free if iv in used[0] and iv not in used[1]]
    cols = [iv for iv in free if iv in used[1] and iv not in used[0]]
    return (rows, cols) if rows and cols else None


def _loads(v: Value, r: ReduceOp) -> list[LoadValueOp]:
    out, todo, seen = [], [v], set()
    while todo:
        x = todo.pop()
        op = x.owner
        if id(x) in seen or not isinstance(op, Operation) or not r.is_ancestor_of(op):
            continue
        seen.add(id(x))
        if isinstance(op, LoadValueOp):
            out.append(op)
        todo.extend(captured_values(op) if op.regions else op.operands)
    return out


def _indices(loads: list[LoadValueOp]) -> set[Value]:
    return {leaf.value for ld in loads for e in ld.index_exprs() for leaf in leaves(e) if isinstance(leaf, ValueDim)}


def _why_not(r: ReduceOp, rows: list[Value], cols: list[Value]) -> str | None:
    loops = enclosing_loops(r)
    if any(not isinstance(lp, ForOp) for lp in loops):
        return "it runs inside another reduction"
    if any(isinstance(op, LoopBase) for op in r.walk() if op is not r):
        return "its reduction holds loops"
    # the tile's row and column indices are the innermost of each side (outer ones go to blocks)
    got = products_of(r, rows[-1], cols[-1])
    if isinstance(got, str):
        return got
    return _why_not_lanes(loops[0], [*rows, *cols])


def _why_not_lanes(nest: ForOp, lanes: list[Value]) -> str | None:
    """Why the accesses in the loop nest around a contraction would not follow its accumulator's lanes (the output
    indices `lanes`): each subscript linear in them, none computed from values that vary with them, and no store
    of values varying with a lane at an address that does not."""
    return why_not_follow(list(nest.walk()), lanes, {iv: _varying(nest, iv) for iv in lanes}, "the output indices")


def _varying(nest: ForOp, iv: Value) -> set[Value]:
    """The values under `nest` that vary with the loop index `iv` (`iv` included)."""
    out = {iv}
    for op in nest.walk():  # program order: a value's definition comes before its uses
        if any(v in out for v in (captured_values(op) if op.regions else op.operands)):
            out.update(op.results)
    return out
