"""Rewrites the tile passes share: replacing loop indices by index expressions (in subscripts, or through a
`tile.index` where an index is used as a value), and splitting a loop into an outer and an inner one."""

from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.loop import indexing

from irforge import index_expr as ix
from irforge.ir import Operation, Value


def substitute(region_op: Operation, repl: dict[Value, ix.IndexExpr], at: T.LoopOp) -> None:
    """Inside `region_op`, every use of a value of `repl` becomes its expression: subscripts and `tile.index`
    expressions take it in place; any other use (a cast of the index, say) reads a `tile.index` placed first in
    `at`'s body."""
    subscripted = (T.LoadOp, T.StoreOp, T.StageOp, T.IndexOp)
    as_values = {
        v: [(u, i) for u, i in v.uses if region_op.is_ancestor_of(u) and not isinstance(u, subscripted)] for v in repl
    }
    for op in list(region_op.walk()):
        if op is not region_op and isinstance(op, subscripted) and any(v in repl for v in op.operands):
            _rewrite_subscripts(op, repl)
    for v, e in repl.items():
        uses = as_values[v]
        if not uses:
            continue
        idx = T.IndexOp.build(e, v.name_hint)
        at.body.insert(0, idx)
        for user, i in uses:
            user.set_operand(i, idx.result)


def _rewrite_subscripts(op: Operation, repl: dict) -> None:
    extents = indexing.loop_extents(op)
    if isinstance(op, T.IndexOp):
        exprs, key, fixed, tail = [op.index_expr()], "expr", [], []
    else:
        exprs, key = op.index_exprs(), "index"
        fixed = [op.operands[0]]
        tail = [op.operands[-1]] if isinstance(op, T.StoreOp) else []
    new = [indexing.simplify(indexing.substitute(e, repl), extents) for e in exprs]
    m, ops = indexing.canonical(new)
    op.set_operands([*fixed, *ops, *tail])
    op.attributes[key] = m


def tile_loop(loop: T.ForOp, sizes: tuple[int, ...], inner_bind=(), hints=("t", "p")) -> T.ForOp:
    """Split `loop` (dimension d of extent E into E / sizes[d] outer x sizes[d] inner; only dimensions with size
    > 1 go inside) into itself, now over the tiles, and a new inner loop over a tile's points, distributed over
    `inner_bind`; returns the inner loop. Every index becomes `outer * size + inner`."""
    ext = loop.extents
    inner_dims = [d for d, s in enumerate(sizes) if s > 1]
    outer = T.ForOp.build(
        [e // s for e, s in zip(ext, sizes)],
        bind=loop.bind,
        iv_hints=[f"{hints[0]}{iv.name_hint or d}" for d, iv in enumerate(loop.ivs)],
    )
    outer.loc = loop.loc
    inner = T.ForOp.build(
        [sizes[d] for d in inner_dims],
        bind=inner_bind,
        iv_hints=[f"{hints[1]}{loop.ivs[d].name_hint or d}" for d in inner_dims],
    )
    inner.loc = loop.loc
    for op in list(loop.body.ops):
        op.detach()
        inner.body.append(op)
    outer.body.append(inner)
    repl = {}
    for d, iv in enumerate(loop.ivs):
        e: ix.IndexExpr = indexing.ValueDim(outer.ivs[d])
        if sizes[d] > 1:
            e = e * sizes[d] + indexing.ValueDim(inner.ivs[inner_dims.index(d)])
        repl[iv] = e
    substitute(inner, repl, inner)
    loop.parent.insert_before(loop, outer)
    for k, v in loop.attributes.items():
        if k not in ("extents", *T.SCHEDULE_ATTRIBUTES):
            outer.attributes[k] = v
    loop.erase()
    return inner


def collapse_into(band: T.ForOp, inner: T.ForOp) -> T.ForOp:
    """Make `band` and the free loop `inner` in its body one loop over both their dimensions (the band's first);
    the band's other ops (pure) run at each of the new points, before `inner`'s body. Returns the new loop."""
    names = [iv.name_hint for iv in band.ivs + inner.ivs]
    new = T.ForOp.build(band.extents + inner.extents, bind=band.bind, iv_hints=names)
    new.loc = band.loc
    for k, v in band.attributes.items():
        if k not in ("extents", *T.SCHEDULE_ATTRIBUTES):
            new.attributes[k] = v
    for old, iv in zip(band.ivs + inner.ivs, new.ivs):
        old.replace_all_uses_with(iv)
    for op in list(band.body.ops):
        if op is inner:
            for x in list(inner.body.ops):
                x.detach()
                new.body.append(x)
        else:
            op.detach()
            new.body.append(op)
    band.parent.insert_before(band, new)
    band.erase()
    return new
