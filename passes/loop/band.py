"""The band of a kernel's outer free loops, reshaped for fusion: interchanged (their iterations are independent,
so any order is valid) and split (a loop over `c * n` points as one over `n` around one over `c`)."""

from __future__ import annotations

from irforge.dialects.loop import ForOp, KernelOp, LoadOp, LoopOp, StoreOp, indexing
from irforge.dialects.loop.build import Builder
from irforge.dialects.loop.transforms import captured_values, cleanup, self_and_ancestors

from irforge.index_expr import Const, FloorDiv, Mod
from irforge.ir import Operation, OpResult


def free_band(kernel: KernelOp) -> list[ForOp]:
    """The kernel's outer band of perfectly nested free loops (outermost first): the kernel body's only loop, and
    each loop whose body is just one more free loop. Their iterations are independent, so any order is valid."""
    tops = [op for op in kernel.body.ops if isinstance(op, LoopOp)]
    if len(tops) != 1 or not isinstance(tops[0], ForOp):
        return []
    band = [tops[0]]
    while len(band[-1].body.ops) == 1 and isinstance(band[-1].body.ops[0], ForOp):
        band.append(band[-1].body.ops[0])
    return band


def depends_on(values, within: Operation) -> set[int]:
    """Ids of the loop indices (block arguments of loops under `within`) that `values` depend on."""
    out: set[int] = set()
    seen: set[int] = set()
    work = list(values)
    while work:
        v = work.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, OpResult):
            if within.is_ancestor_of(v.op):
                work.extend(captured_values(v.op))
        elif isinstance(v.block.parent_op, LoopOp) and within.is_ancestor_of(v.block.parent_op):
            out.add(id(v))
    return out


def reorder_band(kernel: KernelOp, outer: set[int]) -> bool:
    """Interchange the kernel's free band so the loops whose indices are in `outer` (ids) come first, keeping the
    relative order within both groups. Returns whether anything moved."""
    band = free_band(kernel)
    return _rebuild_band(
        band, [lp for lp in band if id(lp.iv) in outer] + [lp for lp in band if id(lp.iv) not in outer]
    )


def follow_producer(kernel: KernelOp, store: StoreOp, coords: list, loads: list[LoadOp]) -> bool:
    """Interchange the kernel's free band so the loops that the loads' subscripts name directly nest as the
    producer's loops do (the rest after them, in their order): inlined, the producer's reductions keep the
    iteration order their schedule is made for (attention over heads, then rows, then the head dimension) and the
    consumer's store takes the permutation. `store` is the producer's, `coords` the loop index each of its
    subscripts is (`Producer.coords`). Returns whether anything moved."""
    band = free_band(kernel)
    around = reversed(list(self_and_ancestors(store)))
    depth = {id(lp.iv): d for d, lp in enumerate(around) if isinstance(lp, ForOp)}
    rank: dict[int, int] = {}
    for iv, e in zip(coords, loads[0].index_exprs()):
        if iv is not None and isinstance(e, indexing.ValueDim):
            rank.setdefault(id(e.value), depth[id(iv)])
    return _rebuild_band(band, sorted(band, key=lambda lp: rank.get(id(lp.iv), len(depth))))


def _rebuild_band(band: list[ForOp], order: list[ForOp]) -> bool:
    if order == band:
        return False
    inner_ops = list(band[-1].body.ops)
    b = Builder.before_op(band[0])
    new_ivs = {}
    for lp in order:
        iv, b = b.for_(lp.extent, lp.iv.name_hint)
        b.block.parent_op.loc = lp.loc
        new_ivs[lp] = iv
    for op in inner_ops:
        b.insert(op.detach())
    for lp in band:
        lp.iv.replace_all_uses_with(new_ivs[lp])
    band[0].erase()
    return True


def split_loops(kernel: KernelOp, loads: list[LoadOp]) -> bool:
    """Split each loop of the kernel's free band whose index the loads' subscripts only read divided by a constant
    `c` (`iv floordiv c`, `iv mod c`, `c` dividing the extent) into a loop over `iv floordiv c` around one over
    `iv mod c`. A reduction inlined at those subscripts then depends on the outer loop alone and is hoisted out of
    the inner one: attention read through the heads' transpose ([S, H * D]) is computed once per head and row."""
    changed = False
    for lp in free_band(kernel):
        divisors = {
            x.rhs.value
            for ld in loads
            for e in ld.index_exprs()
            for x in _subexprs(e)
            if isinstance(x, (FloorDiv, Mod)) and x.lhs == indexing.ValueDim(lp.iv) and isinstance(x.rhs, Const)
        }
        c = next(iter(divisors)) if len(divisors) == 1 else None
        if c is None or c <= 1 or lp.extent % c or c == lp.extent:
            continue
        b = Builder.before_op(lp, lp.loc)
        hi, b = b.for_(lp.extent // c, f"{lp.iv.name_hint or 'a'}_hi")
        lo, b = b.for_(c, f"{lp.iv.name_hint or 'a'}_lo")
        whole = b.index(indexing.ValueDim(hi) * c + indexing.ValueDim(lo))
        for op in list(lp.body.ops):
            b.insert(op.detach())
        lp.iv.replace_all_uses_with(whole)
        lp.erase()
        changed = True
    if changed:
        cleanup(kernel)
    return changed


def _subexprs(e):
    yield e
    for k in e.children():
        yield from _subexprs(k)
