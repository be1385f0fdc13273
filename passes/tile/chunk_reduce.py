from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.loop import indexing
from irforge.dialects.tile import fragments
from irforge.passes.tile.heuristics import heuristic
from irforge.passes.tile.rewrites import substitute

from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option


class TileChunkReduce(Pass):
    """Split a reduction into chunks: K iterations become K / bk outer trips of bk inner ones.

    The inner `tile.reduce` folds a chunk from each monoid's identity; the outer folds the chunks' partial
    carriers (a partial carrier is an element of its monoid, the online carrier's too), from the original init.
    Each outer trip is where the slabs a chunk reads can be staged (`tile-stage-inputs`), and the unit a
    reduction split across blocks deals out (`tile-split-reduce`). Reductions that are distributed, vectorized,
    chunked, or are the chunk of an enclosing reduction already are left alone (idempotent), and so are those
    `bk` does not divide, and tensor-core contractions whose atom's k `bk` is not a multiple of. Attention laid out
    on atoms is chunked even into one chunk (`fragments.folds_chunks`: its fold's unit), and a `bk` that cannot
    chunk its keys is refused; its scores' reduction is not chunked (the fold computes it whole). A reduction
    computed in the element (attention's scores inside its keys' loop) moves into the chunk with the rest of the
    body.
    """

    name = "tile-chunk-reduce"
    input_level = "tile"
    anchor = "kernel"
    bk: int = option(
        0,
        domain=Choices((0, 1, 2, 4, 8, 16, 32, 64, 128, 256)),
        help="iterations per chunk (0: passes/tile/heuristics.py decides, contractions only; 1: none)",
    )

    def check(self, op: Operation) -> tuple[Operation, str] | None:
        if not isinstance(op, T.KernelOp) or not self.bk:
            return None
        for r in (x for x in op.walk() if _candidate(x) and fragments.folds_chunks(x)):
            k, step = r.extents[0], fragments.atom_step(r)
            if self.bk == 1 or self.bk > k or k % self.bk or self.bk % step:
                return r, (
                    f"bk={self.bk}: attention on tensor-core atoms folds its {k} keys a chunk at a time, so its "
                    f"chunks must divide them in whole atom steps of {step}"
                )
        return None

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp) or self.bk == 1:
            return
        for r in [x for x in op.walk() if _candidate(x)]:
            if _scores_on_atoms(r):
                self.remark(r, "not chunked: attention on atoms computes its scores whole in each chunk of keys")
                continue
            bk = self.bk or heuristic().reduce_chunk(op, r)
            step = fragments.atom_step(r)
            if bk % step:
                self.remark(r, f"not chunked by {bk}: its tensor-core atom takes {step} iterations a step")
            elif 1 < bk < r.extents[0] + fragments.folds_chunks(r) and r.extents[0] % bk == 0:
                chunk(r, bk)


def _candidate(r) -> bool:
    if not isinstance(r, T.ReduceOp) or r.bind or r.vector > 1 or "unroll" in r.attributes:
        return False
    return not is_chunk(r) and not any(isinstance(x, T.ReduceOp) and is_chunk(x) for x in r.body.ops)


def _scores_on_atoms(r: T.ReduceOp) -> bool:
    """Whether `r` is a reduction computed in the element of another (attention's scores, in its keys' loop)
    inside a loop laid out on tensor-core atoms: the flash fold takes it whole, atom step by atom step."""
    around = T.enclosing_loops(r)
    return any(isinstance(a, T.ReduceOp) for a in around) and any("atom" in lp.attributes for lp in around)


def is_chunk(r: T.ReduceOp) -> bool:
    """Whether `r` is the inner reduction of a chunked one: the whole body of a reduction with its monoids that
    yields its results."""
    outer = r.parent_op
    return (
        isinstance(outer, T.ReduceOp)
        and outer.attributes["monoids"] == r.attributes["monoids"]
        and tuple(outer.yielded) == tuple(r.results)
    )


def chunk(r: T.ReduceOp, bk: int) -> T.ReduceOp:
    """Split `r` into K / bk trips of `bk`; returns the inner reduction."""
    k = r.extents[0]
    identity = identity_init(r)
    types = [res.type for res in r.results]
    hints = [f"{res.name_hint or 'acc'}_chunk" for res in r.results]
    inner = T.ReduceOp.build(bk, r.attributes["monoids"], identity, types, iv_hint=f"{r.iv.name_hint or 'r'}_i",
                             result_hints=hints, loc=r.loc)  # fmt: skip
    for op in list(r.body.ops):
        op.detach()
        inner.body.append(op)
    r.attributes["extent"] = k // bk
    r.body.append(inner)
    r.body.append(T.YieldOp(list(inner.results), ()))
    outer_iv = r.iv
    substitute(inner, {outer_iv: indexing.ValueDim(outer_iv) * bk + indexing.ValueDim(inner.iv)}, inner)
    return inner


def identity_init(r: T.ReduceOp) -> tuple:
    """The reduction's init attribute with each carrier at its monoid's identity."""
    return tuple(tuple(m.identity(res.type, i) for i, res in enumerate(results)) for m, _, results in r.carriers)
