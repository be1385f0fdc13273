"""lower-to-kernel's rule for a combine over a block axis that goes `via partials`: the kernel becomes two.

Blocks of one launch cannot wait for each other, so a combine across them ends a kernel: the first kernel runs
everything up to the combine and stores each block's partial carrier in a workspace (`[blocks, points...]`, one
buffer per carrier component, indexed by the combine's axis and the free loops around it); the second kernel
starts where the combine was, folding the workspace's partials with the combine's monoids (any monoid: the online
carrier of a split softmax row too), and runs everything after it. Both kernels keep the original's loops; the
second drops what came before the combine (its stores, and whatever only fed them), and its grid along the
combine's axis when nothing after the combine is distributed over that axis.

This is a rewrite of tile IR into tile IR, done before materialization: each kernel then materializes as usual.
"""

from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.loop import indexing
from irforge.dialects.tile.algebra import affine_stores
from irforge.dialects.tile.columns import column_loop, varies

from irforge import index_expr as ix
from irforge.ir import Operation
from irforge.types import TensorType

SPREAD_WIDTH = 4  # points a thread folds side by side in a combine kernel: 16-byte loads of f32 partials


def via_partials(comb: T.CombineOp) -> bool:
    """Whether a combine is materialized by a second kernel (over a block axis, via partials explicitly or because
    atomics cannot take it)."""
    if len(comb.over) != 1 or comb.over[0] not in T.BLOCK_AXES:
        return False
    via = comb.attributes.get("via")
    return via == "partials" or (via is None and affine_stores(comb) is not None)


def why_not(comb: T.CombineOp) -> str | None:
    """Why a combine cannot be materialized via partials (None when it can): it must not sit in a reduction."""
    if any(isinstance(a, T.ReduceOp) for a in T.enclosing_loops(comb)):
        return f"combines over {comb.over[0]} inside a reduction; a second kernel cannot start there"
    return None


def split_kernels(func: Operation) -> None:
    """Replace every kernel of `func` that holds a combine via partials by its two kernels (repeatedly: the second
    kernel may hold another)."""
    while True:
        found = next(
            ((k, c) for k in func.body.ops if isinstance(k, T.KernelOp) for c in k.walk()
             if isinstance(c, T.CombineOp) and via_partials(c)),
            None,
        )  # fmt: skip
        if found is None:
            return
        _split(func, *found)


def _position(kernel: T.KernelOp, target: Operation) -> int:
    return next(i for i, op in enumerate(kernel.walk()) if op is target)


def shares(kernel: T.KernelOp, comb: T.CombineOp) -> int:
    """Partials a combine over a block axis folds: the trips of the split reduction it combines (the kernel's
    grid along the axis may be wider, for loops after the combine), else one per block of the axis."""
    owner = comb.operands[0].owner
    if isinstance(owner, T.ReduceOp) and owner.bind == comb.over:
        return owner.extents[0]
    return kernel.axis_size(comb.over[0])


def _split(func: Operation, kernel: T.KernelOp, comb: T.CombineOp) -> None:
    blocks = shares(kernel, comb)
    loops = [lp for lp in T.enclosing_loops(comb) if isinstance(lp, T.ForOp)]
    dims = [(lp, iv, n) for lp in loops for iv, n in zip(lp.ivs, lp.extents)]
    points = [n for _, _, n in dims]
    name = kernel.sym_name
    work = []
    for v in comb.operands:  # a component that does not vary along a point index is stored once for all its values
        used = tuple(varies(v, iv, set()) or not _one_writer(comb, lp, iv, n) for lp, iv, n in dims)
        shape = (blocks, *(n if u else 1 for n, u in zip(points, used)))
        buf = T.BufferOp.build(TensorType(v.type, shape), f"{v.name_hint or name}_partials", comb.loc)
        func.body.insert_before(kernel, buf)
        work.append((buf.result, used))
    at = _position(kernel, comb)
    first, second = kernel.clone(), kernel.clone()
    func.body.insert_before(kernel, first)
    func.body.insert_before(kernel, second)
    kernel.erase()
    first.attributes["sym_name"] = f"{name}_partial"
    second.attributes["sym_name"] = f"{name}_combine"
    _store_partials(first, at, work, loops)
    _fold_partials(second, at, work, loops)


def _one_writer(comb: T.CombineOp, loop: T.ForOp, iv, extent: int) -> bool:
    """Whether the points along `iv` that would store one element (a component that does not vary along it) come
    down to one writer: a single point, the trips of one thread's own loop, the column of a loop whose threads
    differ only in it (the single-writer rule lets the first store for all), or the columns of a tensor-core atom's
    layout (the first of the lanes sharing a row stores: `memory_access._row_writer`). Threads or blocks dealt the index
    any other way would all write the element: it then keeps its dimension (a thread's strided columns, `tn=1`)."""
    if extent == 1 or not loop.bind:
        return True
    if "atom" in loop.attributes:
        return len(loop.ivs) == 2 and iv is loop.ivs[1]
    return iv is loop.ivs[-1] and column_loop(comb, loop.bind[-1]) is loop


def _ivs(kernel: T.KernelOp, loops: list[T.ForOp], like: Operation) -> list:
    """The loop indices, in `kernel` (a clone), of the free loops around the op at `like`'s place."""
    clones = [lp for lp in T.enclosing_loops(like) if isinstance(lp, T.ForOp)]
    assert len(clones) == len(loops)
    return [indexing.ValueDim(iv) for lp in clones for iv in lp.ivs]


def _at(ivs: list, used: tuple) -> list:
    return [iv if u else ix.Const(0) for iv, u in zip(ivs, used)]


def _store_partials(kernel: T.KernelOp, at: int, work, loops) -> None:
    """The first kernel: up to the combine, then each block's partial carrier into the workspace."""
    ops = list(kernel.walk())
    comb = ops[at]
    axis = comb.over[0]
    unit = T.ForOp.build([shares(kernel, comb)], bind=(axis,), iv_hints=["blk"])
    unit.loc = comb.loc
    ivs = _ivs(kernel, loops, comb)
    for v, (buf, used) in zip(comb.operands, work):
        unit.body.append(T.StoreOp.build(buf, [indexing.ValueDim(unit.ivs[0]), *_at(ivs, used)], v, comb.loc))
    comb.parent.insert_before(comb, unit)
    later = [op for op in ops[at + 1 :] if not op.is_ancestor_of(comb)]
    for op in reversed(later):
        if op.parent is not None and not any(o.is_ancestor_of(op) and o is not op for o in later):
            _erase(op)
    _erase(comb)
    n = unit.extents[0]
    bound = [lp for lp in kernel.walk() if isinstance(lp, T.LoopOp) and axis in lp.bind]
    if all(lp.bind == (axis,) and lp.work_items <= n for lp in bound):
        kernel.set_axis_size(axis, n)  # the blocks past the shares had only the erased loops to run


def _fold_partials(kernel: T.KernelOp, at: int, work, loops) -> None:
    """The second kernel: the combine's result folded from the workspace; what came before it, gone."""
    ops = list(kernel.walk())
    comb = ops[at]
    axis = comb.over[0]
    blocks = shares(kernel, comb)
    types = [r.type for r in comb.results]
    init = [tuple(m.identity(t, i) for i, t in enumerate(types[k : k + w])) for k, (m, w, _) in _offsets(comb)]
    # The fold is a reduction like any other: where the block's threads are free, they share it (each folds some
    # partials, then they combine), rather than each repeating it whole.
    threads = "threadIdx.x"
    shared = kernel.axis_size(threads) > 1 and not any(threads in lp.bind for lp in T.enclosing_loops(comb))
    hints = [r.name_hint for r in comb.results]
    fold = T.ReduceOp.build(blocks, comb.attributes["monoids"], init, types, bind=(threads,) if shared else (),
                            iv_hint="blk", result_hints=hints, loc=comb.loc)  # fmt: skip
    ivs = _ivs(kernel, loops, comb)
    loaded = [T.LoadOp.build(b, [indexing.ValueDim(fold.iv), *_at(ivs, used)], loc=comb.loc) for b, used in work]
    for ld in loaded:
        fold.body.append(ld)
    fold.body.append(T.YieldOp([ld.result for ld in loaded], ()))
    comb.parent.insert_before(comb, fold)
    folded = fold.results
    if shared:
        across = T.CombineOp.build(comb.attributes["monoids"], comb.attributes["widths"], fold.results, (threads,),
                                   comb.loc, hints)  # fmt: skip
        comb.parent.insert_before(comb, across)
        folded = across.results
    for old, new in zip(comb.results, folded):
        old.replace_all_uses_with(new)
    before = [op for op in ops[:at] if not op.is_ancestor_of(comb) and op is not kernel]
    for op in before:
        if isinstance(op, T.StoreOp) and op.parent is not None:
            op.erase()
    comb.erase()
    _sweep(kernel)
    if not any(axis in lp.bind for lp in kernel.walk() if isinstance(lp, T.LoopOp)):
        band = next((lp for lp in T.enclosing_loops(fold) if lp.bind == ("threadIdx.x",)), None)
        if band is None or not _spread(kernel, band, axis):
            kernel.set_axis_size(axis, 1)


def _spread(kernel: T.KernelOp, band: T.ForOp, axis: str) -> bool:
    """Deal the thread band of the second kernel over `axis` too, in work items of SPREAD_WIDTH along its last
    dimension: each point's fold is independent, and the first kernel's layout (a contraction's register tile or
    mma accumulators: tens of points a thread) would leave a few blocks each folding tens of points' partials one
    after another (a 32 x 3584 split-K product's combine took 13.6 us on 28 blocks). False (nothing changed) when
    the band has loops inside, whose own layout may depend on the band's."""
    if any(isinstance(op, T.ForOp) for op in band.walk() if op is not band):
        return False
    width = SPREAD_WIDTH if band.extents[-1] % SPREAD_WIDTH == 0 else 1
    for key in ("split", "warps", "atom", "raster"):
        band.attributes.pop(key, None)
    band.set_vector((1,) * (len(band.extents) - 1) + (width,))
    band.attributes["bind"] = (axis, "threadIdx.x")
    threads = kernel.axis_size("threadIdx.x")
    kernel.set_axis_size(axis, -(-band.work_items // threads))
    return True


def _offsets(comb: T.CombineOp):
    at = 0
    for m, w, vals in comb.carriers:
        yield at, (m, w, vals)
        at += w


def _erase(op: Operation) -> None:
    for r in op.results:
        for user, _ in list(r.uses):
            if user.parent is not None:
                _erase(user)
    if op.parent is not None:
        op.erase()


def _sweep(kernel: T.KernelOp) -> None:
    """Erase what computes nothing the kernel stores: unused pure ops, and loops left without a store."""
    changed = True
    while changed:
        changed = False
        for op in list(kernel.walk(post_order=True)):
            if op is kernel or op.parent is None or isinstance(op, T.YieldOp):
                continue
            unused = all(not r.uses for r in op.results)
            dead = (op.has_trait("pure") and unused) or (
                isinstance(op, T.ForOp) and not any(isinstance(x, T.StoreOp) for x in op.walk())
            )
            if dead:
                op.erase()
                changed = True
