"""Transformations and analyses of loop IR that several passes share.

Cleanups (each is also a pass): fold `loop.index` into subscripts and simplify subscripts with loop extents,
hoist loop-invariant computation (LICM), merge identical computation (CSE, reductions included), erase dead
computation (DCE). Program structure: a function's kernels, who writes and who reads a buffer. Fusion, which builds
on these, is the fusion passes' own (`passes/loop/fusion.py`).
"""

from __future__ import annotations

from collections.abc import Callable

from irforge.attributes import attr_key
from irforge.builtin import FuncOp, ReturnOp
from irforge.index_expr import Const
from irforge.ir import Operation, OpResult, Value
from irforge.location import fuse

from ..scalar import ConstOp
from . import (
    ForOp,
    IndexOp,
    KernelOp,
    LoadOp,
    LoopOp,
    ReduceOp,
    StoreOp,
    indexing,
)


# ---- values an op depends on -----------------------------------------------------------------------------------
def defining_op(v: Value) -> Operation:
    """The op that defines `v`: its op, or the op whose region declares the block argument."""
    return v.op if isinstance(v, OpResult) else v.block.parent_op


def captured_values(op: Operation) -> list[Value]:
    """Values `op` (its operands and everything nested in it) uses that are defined outside it, in first-use order."""
    seen: dict[int, Value] = {}
    for inner in op.walk():
        for v in inner.operands:
            if id(v) not in seen and not (inner is not op and op.is_ancestor_of(defining_op(v))):
                seen[id(v)] = v
    return list(seen.values())


def _defined_inside(v: Value, scope: Operation) -> bool:
    owner = defining_op(v)
    return owner is not None and scope.is_ancestor_of(owner)


# ---- index cleanups --------------------------------------------------------------------------------------------
def fold_index_ops(root: Operation) -> bool:
    """Substitute `loop.index` results into the subscripts (and index ops) that use them; erase unused ones."""
    changed = False
    for op in list(root.walk()):
        if isinstance(op, (indexing.SubscriptOp, IndexOp)) and any(isinstance(v.owner, IndexOp) for v in op.operands):
            _rewrite_subscripts(op, lambda e, op=op: indexing.substitute(e, _index_defs(op)))
            changed = True
    for op in list(root.walk(post_order=True)):
        if isinstance(op, IndexOp) and not op.result.uses and op.parent is not None:
            op.erase()
    return changed


def _index_defs(op: Operation) -> dict:
    return {v: v.owner.index_expr() for v in op.operands if isinstance(v, OpResult) and isinstance(v.owner, IndexOp)}


def simplify_subscripts(root: Operation) -> bool:
    """Fold what the loop extents decide in every subscript (`(a*8 + b) floordiv 8 -> a` for b < 8, ...)."""
    changed = False
    for op in list(root.walk()):
        if isinstance(op, (indexing.SubscriptOp, IndexOp)):
            extents = indexing.loop_extents(op)
            changed |= _rewrite_subscripts(op, lambda e, x=extents: indexing.simplify(e, x))
    return changed


def _rewrite_subscripts(op: Operation, fn: Callable) -> bool:
    """Apply `fn` to each subscript expression of a load, store or index op and rebuild its operands canonically."""
    if isinstance(op, IndexOp):
        old = [op.index_expr()]
        new = [fn(e) for e in old]
        if new == old:
            return False
        m, vals = indexing.canonical(new)
        op.set_operands(vals)
        op.attributes["expr"] = m
        return True
    old = op.index_exprs()
    new = [fn(e) for e in old]
    if new == old:
        return False
    m, vals = indexing.canonical(new)
    value = [op.value] if isinstance(op, StoreOp) else []
    op.set_operands([op.buffer, *vals, *value])
    op.attributes["index"] = m
    return True


# ---- loop-invariant code motion --------------------------------------------------------------------------------
def hoistable(op: Operation) -> bool:
    return op.has_trait("pure") and op.results != ()


def hoist_invariants(root: Operation) -> bool:
    """Move computation out of every loop it does not depend on (innermost loops first, as far out as it goes).

    Pure ops only (scalar math, loads, index arithmetic, whole reductions); nothing leaves a loop of extent 0,
    whose body never runs.
    """
    changed = False
    for loop in [op for op in root.walk(post_order=True) if isinstance(op, LoopOp)]:
        if loop.extent == 0 or loop.parent is None:
            continue
        for op in list(loop.body.ops):
            if hoistable(op) and not any(_defined_inside(v, loop) for v in captured_values(op)):
                op.detach()
                loop.parent.insert_before(loop, op)
                changed = True
    return changed


# ---- common subexpressions -------------------------------------------------------------------------------------
def op_key(op: Operation):
    """What `op` computes, up to value names: equal keys compute equal values (for pure ops)."""
    attrs = tuple(sorted((k, attr_key(v)) for k, v in op.attributes.items()))
    types = tuple(str(r.type) for r in op.results)
    if not op.regions:
        return (op.name, tuple(id(v) for v in op.operands), attrs, types)
    return (op.name, attrs, types, region_key(op, {}))


def region_key(op: Operation, subst: dict):
    """The regions of `op` canonically: inner values numbered, outer ones by identity (or `subst`'s markers)."""
    numbers: dict[int, int] = {}
    out = []

    def ref(v):
        n = numbers.get(id(v))
        if n is not None:
            return ("i", n)
        return ("r", subst[v]) if v in subst else ("x", id(v))

    def visit(o):
        out.append(
            (
                o.name,
                tuple(ref(v) for v in o.operands),
                tuple(sorted((k, attr_key(v)) for k, v in o.attributes.items())),
                tuple(str(r.type) for r in o.results),
            )
        )
        for r in o.results:
            numbers[id(r)] = len(numbers)
        for region in o.regions:
            for block in region.blocks:
                for a in block.args:
                    numbers[id(a)] = len(numbers)
                out.append(("block", tuple(str(a.type) for a in block.args)))
                for inner in block.ops:
                    visit(inner)
                out.append(("end",))

    for region in op.regions:
        for block in region.blocks:
            for a in block.args:
                numbers[id(a)] = len(numbers)
            for inner in block.ops:
                visit(inner)
    return tuple(out)


def eliminate_common(root: Operation, only: type | None = None) -> bool:
    """Replace a pure op by an identical one that dominates it (earlier in its block or an enclosing one).

    `only` restricts the merging to one kind of op (duplicate-load elimination).
    """
    changed = False

    def block(b, scopes):
        nonlocal changed
        scopes.append({})
        for op in list(b.ops):
            candidate = hoistable(op) and (only is None or isinstance(op, only))
            if candidate:
                key = op_key(op)
                prev = next((s[key] for s in reversed(scopes) if key in s), None)
                if prev is not None:
                    for old, new in zip(op.results, prev.results):
                        old.replace_all_uses_with(new)
                    prev.loc = fuse([prev.loc, op.loc])
                    op.erase()
                    changed = True
                    continue
            before, changed = changed, False
            for region in op.regions:
                for inner in region.blocks:
                    block(inner, scopes)
            if candidate:
                # Its key again only when merges inside its regions changed them (a region's key walks it all).
                scopes[-1][op_key(op) if changed else key] = op
            changed |= before
        scopes.pop()

    for region in root.regions:
        for b in region.blocks:
            block(b, [])
    return changed


# ---- dead code -------------------------------------------------------------------------------------------------
def eliminate_dead(root: Operation) -> bool:
    """Erase pure ops (reductions included) whose results are unused, free loops left with empty bodies, and loops
    that never run (extent 0): a free one with its body, a reduction replaced by its carriers' init values."""
    changed = False

    def sweep(block):
        nonlocal changed
        for op in reversed(list(block.ops)):  # users before the values they use
            if isinstance(op, ReduceOp) and op.extent == 0:
                inits = [v for _, init, _ in op.carriers for v in init]
                for r, v in ((r, v) for r, v in zip(op.results, inits) if r.uses):  # an unused one is dead
                    const = ConstOp.build(v, r.type, op.loc)
                    op.parent.insert_before(op, const)
                    r.replace_all_uses_with(const.result)
            for region in op.regions:
                for b in region.blocks:
                    sweep(b)
            empty = isinstance(op, (ForOp, ReduceOp)) and op.extent == 0
            if (
                empty
                or (hoistable(op) and not any(r.uses for r in op.results))
                or (isinstance(op, ForOp) and not op.body.ops)
            ):
                op.erase()
                changed = True

    for region in root.regions:
        for b in region.blocks:
            sweep(b)
    return changed


def unwrap_unit_loops(root: Operation) -> bool:
    """Replace each free loop of extent 1 by its body, its index by 0."""
    changed = False
    for loop in [op for op in root.walk(post_order=True) if isinstance(op, ForOp) and op.extent == 1]:
        zero = IndexOp.build(Const(0), loc=loop.loc)
        loop.parent.insert_before(loop, zero)
        loop.iv.replace_all_uses_with(zero.result)
        for op in list(loop.body.ops):
            loop.parent.insert_before(loop, op.detach())
        loop.erase()
        changed = True
    return changed


def cleanup(kernel: Operation) -> None:
    """Canonical form after a rewrite: no unit loops; folded, simplified subscripts; hoisted, merged, dead-free
    computation."""
    unwrap_unit_loops(kernel)
    fold_index_ops(kernel)
    simplify_subscripts(kernel)
    while eliminate_dead(kernel) | hoist_invariants(kernel) | eliminate_common(kernel):
        pass


# ---- program structure -----------------------------------------------------------------------------------------
def kernels(func: FuncOp) -> list[KernelOp]:
    return [op for op in func.body.ops if isinstance(op, KernelOp)]


def writer(buffer: Value) -> KernelOp | None:
    for op, _ in buffer.uses:
        if isinstance(op, StoreOp) and op.buffer is buffer:
            return next(a for a in self_and_ancestors(op) if isinstance(a, KernelOp))
    return None


def updated_states(func: FuncOp, upto: KernelOp) -> set:
    """State arguments whose value on entry is gone once kernel `upto` has run: a kernel at or before it wrote the
    state's result buffer (the same memory). Fusion must not move a load of one to or past that point."""
    ret = func.body.ops[-1]
    ks = kernels(func)
    at = ks.index(upto)
    gone = set()
    for _, arg, pos in func.state_pairs():
        w = writer(ret.operands[pos])
        if w is not None and w in ks and ks.index(w) <= at:
            gone.add(arg)
    return gone


def reader_kernels(buffer: Value) -> list[KernelOp]:
    out = []
    for op in buffer.users:
        if isinstance(op, LoadOp):
            k = next(a for a in self_and_ancestors(op) if isinstance(a, KernelOp))
            if k not in out:
                out.append(k)
    return out


def is_returned(buffer: Value) -> bool:
    return any(isinstance(op, ReturnOp) for op in buffer.users)


def self_and_ancestors(op):
    """`op`, then the ops around it, innermost first."""
    if op is not None:
        yield op
        yield from op.ancestors()
