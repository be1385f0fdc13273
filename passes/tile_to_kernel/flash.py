"""lower-to-kernel's rule for attention on the tensor cores: a chunk of an `online` carrier whose key is a
contraction (`fragments.attention_operands`), in a loop `tile-tensorize` laid out on `mma.m16n8k16` or a wgmma atom
with whole rows a warp.

The carrier `(m, l, O)` folds a chunk of keys as `keyed.py` folds any keyed carrier, key first, but the chunk's
keys and terms come from the tensor cores:

1. the scores `S = Q · Kᵀ` of the warp's rows and the chunk's keys: an accumulator fragment `[rows, keys]`, one
   `kernel.mma` per step of 16 along the head dimension, the factors' fragments read as any contraction's
   (`tensor_cores._factor`: ldmatrix from the staged slabs);
2. the key `x` of each of the lane's scores (the element's ops on them: scale, a causal mask from indices), on the
   fragment's register tile (the lane's rows by its keys: `fragments.points`);
3. the join of the carrier's key with each row's largest `x`: the lane's, then across the four lanes holding the
   row (shuffles); a lane whose rows stay within the key's slack (`Monoid.key_slack`) keeps its key;
4. the carrier's sums read at the new key (the monoid's `keyed_program`: `l · exp(m - k)`, `O · exp(m - k)`; as
   they are where the key stayed), then
   each element's terms at it: a constant weight's (the `1` of `l`) summed over the row's keys, and for a weight
   that is a factor (V) the product `exp(x - k) · V`: the terms' tile converted to the weights' 16-bit type is,
   16 keys at a time, the `a` fragment of an mma whose `b` is V's slab (an accumulator's lane elements are an `a`
   fragment's, reordered: no data leaves the lane).

So `exp(x - k)` enters the second product in the factors' 16-bit type, as in every flash attention; the fold is
otherwise the keyed carrier's, and causal chunks above the diagonal are skipped as there (`masked.py`).

On a wgmma atom (`tensor_cores.on_wgmma`: K's and V's slabs copied by the tensor memory accelerator in a layout a
descriptor names) each product is one group of wgmmas of the warpgroup's 64 rows, fenced, committed and waited for:
S with Q's fragments from registers (each warp's, read as on mma.sync, once before the loop over chunks where Q's
slab is staged outside it: `before_keys`) and K's tile through its descriptor; O with
the terms' `a` fragments from registers and V's tile [16, head dimension] MN-major. O is then the warpgroup's
accumulator `[64, head dimension]`, whose lane elements are those of the mma warp tile of the warp's 16 rows, so
steps 2-4 are the same.
"""

from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.kernel import fragments as layouts
from irforge.dialects.kernel.builder import Val
from irforge.dialects.kernel.types import FragType, element_type
from irforge.dialects.tile import fragments
from irforge.dialects.tile.vectors import expand

from irforge.ir import Value
from irforge.scalar_ops import MONOIDS
from irforge.target import target
from irforge.types import TensorType, f32, index

from . import masked
from .emit import run_steps
from .tensor_cores import _factor, _slab_tile, atom_loop, on_wgmma


def chain(r: T.ReduceOp) -> tuple[T.ForOp, fragments.AttentionOperands] | None:
    """(the loop laid out on an atom, its attention operands) when `r` is that attention's online reduction or,
    chunk by chunk (`lower_to_kernel._chunk`), holds it."""
    found = atom_loop(r)
    if found is None:
        return None
    loop, inner = found
    ops = fragments.attention_operands(loop, *loop.ivs)
    return (loop, ops) if not isinstance(ops, str) and ops.contraction.reduce is inner else None


def applies(r: T.ReduceOp) -> bool:
    found = chain(r)
    return found is not None and found[1].contraction.reduce is r


def _warp_tile(loop: T.ForOp) -> tuple[int, int]:
    """The warp's fragment tile: its rows (a few on the atoms' top half: `fragments.fragment_rows`) by its columns."""
    rows, cols = (e // w for e, w in zip(loop.extents, loop.attributes["warps"]))
    return fragments.fragment_rows(rows), cols


def carrier_types(r: T.ReduceOp) -> list | None:
    """The kernel types of `r`'s carriers when it is (or holds) a tensorized attention, else None: the key and a
    constant weight's sum per row of the lane (`[rows, 1]`), a factor weight's sum the warp's accumulator."""
    found = chain(r)
    if found is None:
        return None
    loop, ops = found
    tile = _warp_tile(loop)
    rows = TensorType(f32, (2 * tile[0] // 16, 1))
    acc = FragType("acc", f32, (64, tile[1]), "wgmma") if on_wgmma(loop) else FragType("acc", f32, tile)
    return [rows] + [rows if w is None else acc for w in ops.weights]


def register_tile(m, r: T.ReduceOp, v: Value) -> Value:
    """A carrier as the rest of the kernel sees it where the chain ends: an accumulator as the lane's register tile."""
    from .lower_to_kernel import _chunk

    parent = r.parent_op
    if not isinstance(v.type, FragType) or (isinstance(parent, T.ReduceOp) and _chunk(parent) is r):
        return v
    loop, _ = chain(r)
    return m.kb.reshape(v, TensorType(f32, loop.vector_shape), v.name_hint)


def fold(m, op: T.ReduceOp, inits: list[Value]) -> None:
    """Materialize the chunk `op` from the carrier `inits` (kernel values)."""
    masked.fold_unless_skipped(m, op, inits, _fold)


def _fold(m, op: T.ReduceOp, inits: list[Value]) -> list[Value]:
    kb = m.kb
    loop, ops = chain(op)
    tile = _warp_tile(loop)
    keys = op.extents[0]
    hoisted = m.before_keys.get(ops.contraction.a_reduction)
    origin = hoisted[0] if hoisted else _origin(m, loop)
    lane_t = kb.index(Val(m.trip[loop]) % 4, "quad_lane")

    # 1. the scores, S = Q · Kᵀ, on the warp's rows and the chunk's keys
    scores = ops.contraction.a_reduction
    wgmma = on_wgmma(loop)
    lanes = (2 * tile[0] // 16, keys // 4)
    if wgmma:
        s_tile = kb.reshape(_scores_on_wgmma(m, loop, ops, origin, op.iv, keys), TensorType(f32, lanes), "scores")
    else:
        s = kb.const(0.0, FragType("acc", f32, (tile[0], keys)), "s")
        if hoisted:  # Q's fragments in registers: one mma a step of 16 along the head dimension, unrolled
            for qa, at in zip(hoisted[2], hoisted[1]):
                s = kb.mma(qa, _factor(m, ops.scores[1], "b", (16, keys), at, scores.iv, {}), s, "s")
        else:
            with kb.for_(0, scores.extents[0] // 16, carries=[s], hint="ks", unroll=0) as lp:
                at = origin | {op.iv: kb.index(0), scores.iv: kb.index(Val(lp.iv) * 16, "k0")}
                frags: dict[Value, Value] = {}
                fa = _factor(m, ops.scores[0], "a", (tile[0], 16), at, scores.iv, frags, rows=loop.extents[0])
                fb = _factor(m, ops.scores[1], "b", (16, keys), at, scores.iv, frags)
                lp.yield_(kb.mma(fa, fb, lp.carries[0], "s"))
            s = lp.results[0]
        s_tile = kb.reshape(s, TensorType(f32, lanes), "scores")

    # 2. each score's key x: the element's ops on the lane's tile of scores, its keys' indices a row of the tile
    offsets = tuple(c for _, c in layouts.points("mma", "acc", (16, keys), 0, 0)[: keys // 4])
    first = kb.scalar("mul", lane_t, kb.const(2, index))
    m.env[op.iv] = kb.scalar("add", first, kb.const(offsets, TensorType(index, (1, keys // 4))), hint="key")
    m.env[scores.results[0]] = s_tile
    x_type = TensorType(f32, lanes)
    mask = masked.kept(m, op) if m.skip_masked else None
    if mask is None:
        x = _key(m, ops.key_ops, op.yielded[0], x_type)
    else:  # a chunk the mask keeps whole (below a causal diagonal) skips evaluating it
        every, value = mask
        common = _closure(ops.key_ops, value)
        _key(m, common, value, x_type)
        with kb.if_(every, [x_type]) as br:
            with br.then():
                br.yield_(_key(m, [], value, x_type))
            with br.otherwise():
                br.yield_(_key(m, [o for o in ops.key_ops if o not in common], op.yielded[0], x_type))
        x = br.results[0]

    # 3. the new key: the carrier's joined with each row's largest x (the lane's, then the row's four lanes')
    (monoid, _, results) = op.carriers[0]
    # the weights become the second product's 16-bit A: their exponentials fused (`Monoid.keyed_program`)
    join, key_steps, outputs = monoid.keyed_program(len(results), fused=True)
    row_key = _across_quad(kb, join, kb.reduce(_KIND[join], x, axes=(1,)))

    def at_key(key: Value, components: list[Value]) -> list[Value]:
        return run_steps(kb, key_steps, outputs, {f"a{i}": v for i, v in enumerate(components)} | {"k": key}, f32)

    # 4. the carrier's sums at the new key, plus the chunk's terms
    as_tile = TensorType(f32, loop.vector_shape)
    o_tiles = [kb.reshape(c, as_tile) if isinstance(c.type, FragType) else c for c in inits[1:]]
    # A lane whose rows' largest x stay within the key's slack keeps the key, and its sums as they are: the rescale
    # of O (a multiply an element of the tile) runs only in the chunks where a row's max leaps.
    limit = kb.scalar("add", inits[0], kb.const(monoid.key_slack(), f32))
    leaps = kb.reduce("max", kb.scalar("gt", row_key, limit), hint="leaps")
    with kb.if_(leaps, [inits[0].type, *(t.type for t in o_tiles)]) as br:
        with br.then():
            joined = kb.scalar(join, inits[0], row_key, hint="key")
            br.yield_(joined, *at_key(joined, [inits[0], *o_tiles]))
        with br.otherwise():
            br.yield_(inits[0], *o_tiles)
    key, *sums = br.results
    # a constant weight as it is; a factor's weight one: its terms are then exp(x - k), the second product's A
    weights = [kb.const(1.0, f32) if w else m.get(y) for w, y in zip(ops.weights, op.yielded[1:])]
    terms = at_key(key, [x, *weights])
    out = [key]
    for init, w, s, t in zip(inits[1:], ops.weights, sums, terms):
        if w is None:
            out.append(kb.scalar("add", s, _across_quad(kb, "add", kb.reduce("add", t, axes=(1,)))))
            continue
        acc = kb.reshape(s, init.type)
        p = kb.cast(t, TensorType(w.value.type, lanes), "p")
        if wgmma:
            acc = _weighted_on_wgmma(m, w, p, acc, origin, op.iv, keys)
        else:
            for j in range(keys // 16):
                at = origin | {op.iv: kb.index(16 * j, "key0")}
                vb = _factor(m, w, "b", (16, tile[1]), at, op.iv, {})
                acc = kb.mma(_operand_a(kb, p, tile[0], keys, j), vb, acc, "o")
        out.append(acc)
    return out


def _origin(m, loop: T.ForOp) -> dict:
    """The warp's tile's first row and column: the atom loop's indices at the warp's origin."""
    kb = m.kb
    rows_iv, cols_iv = loop.ivs
    warp = Val(m.trip[loop]) // target().warp_size
    return {rows_iv: kb.index(warp * _warp_tile(loop)[0], "warp_row"), cols_iv: kb.index(0, "warp_col")}


def before_keys(m, r: T.ReduceOp) -> None:
    """Before the loop over chunks of keys `r` (the one right around a chunk), where Q's slab is staged outside it:
    the warp's origin and Q's fragments, the same every chunk, read once (`m.before_keys`) rather than every chunk (F3
    on wgmma: 8 ldmatrix a warp and chunk fewer; F4 on mma.sync's top halves: 8 ldmatrix, and the moves that
    rebuilt their register quads). On mma.sync only where they take at most Q_REGISTERS registers a lane (a decode
    step's top halves up to head dimension 128, a 16-row warp tile's up to 64), beside the scores and O a prefill
    warp keeps there."""
    found = chain(r)
    if found is None:
        return
    loop, ops = found
    scores = ops.contraction.a_reduction
    wgmma = on_wgmma(loop)
    q_type = FragType("a", element_type(ops.scores[0].value.type), (_warp_tile(loop)[0], 16))
    if not wgmma and q_type.per_lane * scores.extents[0] // 16 > 2 * Q_REGISTERS:
        return
    if next((a for a in ops.contraction.reduce.ancestors() if isinstance(a, T.ReduceOp)), None) is not r:
        return  # a loop around the loop over chunks (a warp's share of them): Q's slab may not have landed yet
    stages = [x.operands[0].owner if isinstance(x, T.LoadOp) else None for x in ops.scores[0].ops]
    if all(isinstance(st, T.StageOp) and not r.is_ancestor_of(st) for st in stages):
        origin = _origin(m, loop)
        m.before_keys[scores] = (origin, *_q_fragments(m, loop, ops, origin, ops.contraction.reduce.iv, wgmma))


def _q_fragments(
    m, loop: T.ForOp, ops: fragments.AttentionOperands, origin: dict, key_iv, wgmma: bool
) -> tuple[list, list]:
    """(the indices of each step of 16 along the head dimension, Q's "a" fragment at each): the warp's rows on
    mma.sync; on wgmma each warp's 16 rows read so, a warpgroup's "a" fragment being its warps' ones."""
    kb = m.kb
    scores = ops.contraction.a_reduction
    at = [origin | {key_iv: kb.index(0), scores.iv: kb.index(16 * i, "k0")} for i in range(scores.extents[0] // 16)]
    rows = 16 if wgmma else _warp_tile(loop)[0]
    q = [_factor(m, ops.scores[0], "a", (rows, 16), a, scores.iv, {}, rows=loop.extents[0]) for a in at]
    return at, [_as_wgmma_a(kb, f) for f in q] if wgmma else q


def _scores_on_wgmma(m, loop: T.ForOp, ops: fragments.AttentionOperands, origin: dict, key_iv, keys: int) -> Value:
    """S = Q · Kᵀ for the warpgroup's 64 rows and the chunk's keys as one group of wgmmas, a step of 16 along the
    head dimension each: Q's fragments from registers (read before the loop over chunks where they can be:
    `before_keys`), K's tile [keys, 16] through its descriptor."""
    kb = m.kb
    scores = ops.contraction.a_reduction
    hoisted = m.before_keys.get(scores)
    at, q = hoisted[1:] if hoisted else _q_fragments(m, loop, ops, origin, key_iv, wgmma=True)
    s = kb.const(0.0, FragType("acc", f32, (64, keys), "wgmma"), "s")
    kb.wgmma_fence()  # Q's registers and the zeros were written by other instructions
    for qa, a in zip(q, at):
        s = kb.wgmma(qa, [], *_slab_tile(m, ops.scores[1].loads[0], a), s, "s")
    kb.wgmma_commit()
    kb.wgmma_wait(0)
    return s


def _weighted_on_wgmma(m, w: fragments.Factor, p: Value, acc: Value, origin: dict, key_iv, keys: int) -> Value:
    """O += exp(x - k) · V for the chunk's keys as one group of wgmmas, 16 keys each: the terms from registers (the
    lane's elements of the scores' accumulator are an "a" fragment's), V's tile [16, head dim] through its
    descriptor, MN-major."""
    kb = m.kb
    a = [_operand_a(kb, p, 16, keys, j, "wgmma") for j in range(keys // 16)]
    kb.wgmma_fence()  # the terms' registers, and O rescaled at the new key
    for j, pa in enumerate(a):
        vb, ib = _slab_tile(m, w.loads[0], origin | {key_iv: kb.index(16 * j, "key0")})
        acc = kb.wgmma(pa, [], vb, ib, acc, "o", transpose_b=True)
    kb.wgmma_commit()
    kb.wgmma_wait(0)
    return acc


def _as_wgmma_a(kb, frag: Value) -> Value:
    """A warp's mma "a" fragment [16, 16] as its share of the warpgroup's wgmma "a" fragment [64, 16]: the same lane
    elements (`dialects/kernel/fragments.py`)."""
    t = frag.type
    lane = kb.reshape(frag, TensorType(t.dtype, (t.per_lane,)))
    return kb.reshape(lane, FragType("a", t.dtype, (64, 16), "wgmma"), "q_a")


def _key(m, key_ops, x: Value, t: TensorType) -> Value:
    """The key ops materialized on the lane's tile of scores (indices as tiles of the lane's rows and keys), and
    `x` as a tile of type `t`."""
    for o in key_ops:
        if isinstance(o, T.IndexOp):
            m.env[o.result] = m.index_tile(expand(o.index_expr()))
        else:
            m.op(o)
    v = m.get(x)
    return v if v.type == t else m.kb.splat(v, t)


def _closure(key_ops, v: Value) -> list:
    """The key ops `v` is computed by, in order."""
    need, todo = set(), [v]
    by_result = {r: o for o in key_ops for r in o.results}
    while todo:
        o = by_result.get(todo.pop())
        if o is not None and o not in need:
            need.add(o)
            todo.extend(o.operands)
    return [o for o in key_ops if o in need]


Q_REGISTERS = 16
_KIND = {m.op: name for name, m in MONOIDS.items() if m.width == 1}  # kernel.reduce's kind of a join op


def _across_quad(kb, join: str, rows: Value) -> Value:
    """A `[rows]` tile of the lane's partial joins, joined across the four lanes that hold each row (an
    accumulator's rows are spread over `lane % 4`), as a `[rows, 1]` tile."""
    n = rows.type.shape[0]
    out = kb.const(0.0, TensorType(f32, (n, 1)))
    for i in range(n):
        v = kb.extract(rows, (i,))
        for off in (1, 2):
            v = kb.scalar(join, v, kb.shfl("xor", v, off, 4))
        out = kb.insert(v, out, (i, 0))
    return out


def _operand_a(kb, p: Value, rows: int, keys: int, j: int, layout: str = "mma") -> Value:
    """The `a` fragment `[rows, 16]` of keys 16j .. 16j + 15 of the lane tile `p` of an accumulator `[rows, keys]`:
    each `a` element's point is one the lane holds in the accumulator, at the same place in every lane. With
    `layout` "wgmma", the warp's share of the warpgroup's [64, 16] (its 16 rows: the same elements)."""
    shape = (64, 16) if layout == "wgmma" else (rows, 16)
    a_type = FragType("a", element_type(p.type), shape, layout)
    cols = p.type.shape[1]
    place = {}
    for lane in range(target().warp_size):
        g, t = lane // 4, lane % 4
        held = {pt: i for i, pt in enumerate(layouts.points("mma", "acc", (rows, keys), g, t))}
        spots = [held[(r, c + 16 * j)] for r, c in layouts.points("mma", "a", (rows, 16), g, t)]
        place.setdefault(tuple(spots), lane)
    assert len(place) == 1, "an accumulator's lane elements are an a fragment's in every lane"
    (spots,) = place
    out = kb.const(0.0, TensorType(element_type(p.type), (len(spots),)))
    for e, s in enumerate(spots):
        out = kb.insert(kb.extract(p, (s // cols, s % cols)), out, (e,))
    return kb.reshape(out, a_type, "p_a")
