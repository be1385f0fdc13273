from __future__ import annotations

from irforge.dialects.loop import BufferOp, ForOp, LoadOp, ReduceOp, indexing
from irforge.dialects.loop.build import Builder
from irforge.dialects.loop.transforms import (
    cleanup,
    eliminate_dead,
    is_returned,
    kernels,
    reader_kernels,
    updated_states,
)
from irforge.dialects.scalar import ConstOp, ScalarMathOp
from irforge.passes.loop.fusion import drop_store, inline_producer, producer_of, rename_kernels
from irforge.passes.loop.online_softmax import computation

from irforge import index_expr as ix
from irforge.builtin import FuncOp
from irforge.ir import Operation, OpResult, Value
from irforge.location import fuse
from irforge.pass_manager import Pass

# Ops through which a sum stays linear in one operand, the others fixed: Σ f(p_j, c) = f(Σ p_j, c) when c does not
# depend on j. `div` only with the path as the dividend, `select` only between the path and 0.
_LINEAR = {"mul", "div", "neg", "select"}


class OnlineAttention(Pass):
    """Fold a contraction weighted by softmax probabilities into the online carrier: attention as one reduction.

    Recognizes, by algebra, `o = Σ_j h(exp(x_j - m)) · w_j` where `(m, l)` is an online softmax of the same `x_j`
    over the same range and `h` scales linearly by values that do not depend on `j` (the division by `l`, a
    fully-masked row's select). The sum becomes a component of the online carrier itself, `(m, l, o) = reduce
    online { yield x_j, 1.0, w_j }`, whose combine rescales `o` with `l` when the running max moves (flash
    attention's rescale), and `h` is applied to the result. When `x_j` reads a buffer a contraction wrote (the
    scores `q · k`) and nothing else reads it, that kernel's computation is inlined into the reduction, so the
    scores are never stored: q · kᵀ, the mask and scale, the softmax and P · V are one kernel. SDPA, the written-out
    form and einsum reach it alike. A free loop the reduction's loads read through `floordiv g` (the key/value head
    of a query head, GQA) is split into the shared heads and the `g` heads of each group, which makes the group's
    heads rows of one contraction over a key/value head. The outputs' free loop (the head dimension) stays around
    the reduction: the tile level gives a thread the whole loop as a register tile, so each score is computed once
    per query and key.
    """

    name = "loop-online-attention"
    input_level = "loop"

    def run(self, op: Operation) -> None:
        for func in [o for o in op.walk() if isinstance(o, FuncOp)]:
            changed = False
            while _fold_one(func, self):
                changed = True
            if changed:
                rename_kernels(func)


def _fold_one(func: FuncOp, p: OnlineAttention) -> bool:
    for kernel in kernels(func):
        for r in [o for o in kernel.walk() if isinstance(o, ReduceOp)]:
            found = _softmax_weighted(r)
            if found is not None:
                stats, path, x = found
                folded = _fold(r, stats, path, x)
                eliminate_dead(kernel)  # the statistics' own reduction, when only the sum read it
                scores = _inline_scores(func, kernel, folded)
                groups = _split_shared_heads(folded)
                cleanup(kernel)
                what = f"; the scores' contraction inlined from @{scores}" if scores else ""
                what += "".join(f"; {n} x {g} query heads sharing key/value heads" for n, g in groups)
                p.remark(
                    folded,
                    f"softmax-weighted contraction over {folded.extent} keys folded into the online carrier "
                    f"(m, l, o){what}",
                )
                return True
    return False


# ---- recognition -------------------------------------------------------------------------------------------------
def _softmax_weighted(r: ReduceOp):
    """(stats, path, x) when `r` sums `h(exp(x - m)) · w` for the online softmax `stats` = (m, l) of the same x:
    `path` the (op, operand on the path) pairs from the exp up to the yielded value, `x` r's computation of the
    scores; else None."""
    if r.attributes["monoids"] != ("add",) or r.init != ((0.0,),) or not r.result.type.is_float:
        return None
    path: list[tuple[ScalarMathOp, int]] = []
    v = r.yielded[0]
    while not (isinstance(v.owner, ScalarMathOp) and v.owner.fn == "exp" and _inside(v, r)):
        op = v.owner
        if not (isinstance(op, ScalarMathOp) and _inside(v, r) and op.fn in _LINEAR):
            return None
        on = [i for i, u in enumerate(op.operands) if _reaches_exp(u, r)]
        if len(on) != 1 or not _linear_in(op, on[0]):
            return None
        path.append((op, on[0]))
        v = op.operands[on[0]]
    d = v.owner.operand.owner
    if not (isinstance(d, ScalarMathOp) and d.fn == "sub" and r.is_ancestor_of(d)):
        return None
    x, m = d.operands
    stats = m.owner if isinstance(m, OpResult) else None
    if not _is_softmax_stats(stats, r) or m is not stats.results[0]:
        return None
    if computation(x, r) != computation(stats.yielded[0], stats):
        return None
    # the statistics enter the element only through exp(x - m) and the path's factors that do not depend on the key
    ops = {id(op) for op, _ in path}
    for u, _ in [*stats.results[0].uses, *stats.results[1].uses]:
        if r.is_ancestor_of(u) and u is not d and id(u) not in ops:
            return None
    for op, i in path:
        if any(_inside(s, r) and _reads(s, stats.results, r) for j, s in enumerate(op.operands) if j != i):
            return None
    return stats, [*reversed(path)], x


def _is_softmax_stats(op, r: ReduceOp) -> bool:
    if not (isinstance(op, ReduceOp) and op.attributes["monoids"] == ("online",) and len(op.results) == 2):
        return False
    one = op.yielded[1].owner
    return (
        op.extent == r.extent
        and op.init == ((float("-inf"), 0.0),)
        and not op.is_ancestor_of(r)
        and isinstance(one, ConstOp)
        and one.attributes["value"] == 1.0
        and all(t.type == r.result.type for t in op.results)
    )


def _linear_in(op: ScalarMathOp, i: int) -> bool:
    """Whether `op` is linear (homogeneous) in operand `i`, the others held fixed."""
    if op.fn == "div":
        return i == 0
    if op.fn == "select":
        return i in (1, 2) and _is_zero(op.operands[3 - i])
    return True


def _is_zero(v: Value) -> bool:
    return isinstance(v.owner, ConstOp) and v.owner.attributes["value"] == 0.0


def _inside(v: Value, r: ReduceOp) -> bool:
    """Whether `v` is defined inside `r` (so may depend on its index)."""
    owner = v.owner if isinstance(v, OpResult) else v.block.parent_op
    return owner is r or (isinstance(owner, Operation) and r.is_ancestor_of(owner))


def _reaches_exp(v: Value, r: ReduceOp) -> bool:
    """Whether `v`, computed inside `r`, depends on an exp computed inside `r`."""
    return _reads(v, (), r, exp=True)


def _reads(v: Value, values, r: ReduceOp, exp: bool = False) -> bool:
    """Whether `v`'s computation inside `r` reads one of `values` (or, with `exp`, takes an exp)."""
    todo, seen = [v], set()
    while todo:
        x = todo.pop()
        if x in values:
            return True
        if id(x) in seen or not (isinstance(x, OpResult) and _inside(x, r)):
            continue
        seen.add(id(x))
        if exp and isinstance(x.owner, ScalarMathOp) and x.owner.fn == "exp":
            return True
        todo.extend(x.owner.operands)
    return False


# ---- the rewrite -------------------------------------------------------------------------------------------------
def _fold(r: ReduceOp, stats: ReduceOp, path, x: Value) -> ReduceOp:
    """Replace `r` by the online reduction carrying (m, l, o), then `h` applied to its o."""
    t = r.result.type
    b = Builder.before_op(r, fuse([stats.loc, r.loc]))
    hints = [stats.results[0].name_hint, stats.results[1].name_hint, r.result.name_hint]
    new, iv, body = b.reduce(r.extent, [("online", (float("-inf"), 0.0, 0.0))], [t, t, t], r.iv.name_hint, hints)
    vm: dict[Value, Value] = {r.iv: iv}
    for op in r.body.ops[:-1]:
        body.insert(op.clone(vm))
    w = None
    for op, i in path:  # the weight: the path's factors that depend on the key
        w = _apply(body, op, i, w, lambda s: vm[s] if _inside(s, r) else None, scale=False)
    one = body.const(1.0, t)
    body.yield_(vm[x], one, one if w is None else w)
    o = new.results[2]
    subst = {stats.results[0]: new.results[0], stats.results[1]: new.results[1]}
    for op, i in path:  # h: the factors that do not, read off the new carrier's statistics
        o = _apply(b, op, i, o, lambda s: None if _inside(s, r) else _rebuild(b, s, subst), scale=True)
    r.result.replace_all_uses_with(o)
    r.erase()
    return new


def _apply(b: Builder, op: ScalarMathOp, i: int, v: Value, side, scale: bool) -> Value:
    """`op` applied to `v` in place of its operand `i`, its other operand `s` as `side(s)` (None: left out, so
    `v` passes through). `neg` has no other operand: a constant scale, applied when `scale`. `v` None stands for
    1 (the weight before its first factor)."""
    if op.fn == "neg":
        return b.scalar("neg", v) if scale else v
    j = 0 if op.fn == "select" else 1 - i
    s = side(op.operands[j])
    if s is None or (v is None and op.fn == "mul"):
        return v if s is None else s
    v = b.const(1.0, s.type if op.fn != "select" else op.result.type) if v is None else v
    if op.fn == "select":
        zero = b.const(0.0, v.type)
        return b.scalar("select", s, *((v, zero) if i == 1 else (zero, v)))
    return b.scalar(op.fn, *((v, s) if i == 0 else (s, v)))


def _rebuild(b: Builder, v: Value, subst: dict) -> Value:
    """`v` computed again at `b` with the values of `subst` replaced, where its computation reads them."""
    if v in subst:
        return subst[v]
    op = v.owner
    if not isinstance(op, Operation) or op.regions or not any(_depends(u, subst) for u in op.operands):
        return v
    clone = op.clone({u: _rebuild(b, u, subst) for u in op.operands})
    b.insert(clone)
    return clone.results[v.index]


def _depends(v: Value, subst: dict) -> bool:
    todo, seen = [v], set()
    while todo:
        x = todo.pop()
        if x in subst:
            return True
        op = x.owner
        if id(x) in seen or not isinstance(op, Operation) or op.regions:
            continue
        seen.add(id(x))
        todo.extend(op.operands)
    return False


# ---- grouped-query attention ------------------------------------------------------------------------------------
def _split_shared_heads(folded: ReduceOp) -> list[tuple[int, int]]:
    """Split each free loop around `folded` that the reduction's loads read through `floordiv g` (the key/value
    head of a query head, GQA) into the shared heads and the `g` heads of each group, so that a group's query
    heads are rows of the contraction over one key/value head: the tile level can load that head once for them.
    Returns (heads, g) per split."""
    out = []
    for loop in [a for a in folded.ancestors() if isinstance(a, ForOp)]:
        g = _group(loop, folded)
        if g is None:
            continue
        b = Builder.before_op(loop)
        outer_iv, outer = b.for_(loop.extent // g, loop.iv.name_hint)
        inner_iv, inner = outer.for_(g, loop.iv.name_hint)
        at = inner.index(indexing.ValueDim(outer_iv) * g + indexing.ValueDim(inner_iv))
        loop.iv.replace_all_uses_with(at)
        for op in list(loop.body.ops):
            inner.insert(op.detach())
        out.append((loop.extent // g, g))
        loop.erase()
    return out


def _group(loop: ForOp, folded: ReduceOp) -> int | None:
    """The g of the `loop index floordiv g` some load in `folded` reads, when g divides the loop's extent."""
    for ld in [o for o in folded.walk() if isinstance(o, LoadOp)]:
        for e in ld.index_exprs():
            for x in _subexprs(e):
                if (
                    isinstance(x, ix.FloorDiv)
                    and x.lhs == indexing.ValueDim(loop.iv)
                    and isinstance(x.rhs, ix.Const)
                    and 1 < x.rhs.value < loop.extent
                    and loop.extent % x.rhs.value == 0
                ):
                    return x.rhs.value
    return None


def _subexprs(e):
    yield e
    for k in e.children():
        yield from _subexprs(k)


# ---- the scores' producer ----------------------------------------------------------------------------------------
def _inline_scores(func: FuncOp, kernel, folded: ReduceOp) -> str | None:
    """Inline into `folded` the kernel computing a buffer its scores read, when that kernel's stored value is a
    reduction (the scores' contraction), this kernel reads the buffer only inside `folded` and nobody else does."""
    gone = updated_states(func, kernel)
    for load in [o for o in folded.walk() if isinstance(o, LoadOp)]:
        buf = load.buffer
        p = producer_of(buf)
        if p is None or p.kernel is kernel or not p.has_reduction() or is_returned(buf):
            continue
        if reader_kernels(buf) != [kernel] or any(not folded.is_ancestor_of(u) for u in buf.users if u is not p.store):
            continue
        if any(isinstance(o, LoadOp) and o.buffer in gone for o in p.slice()):
            continue
        inline_producer(folded, p)
        name = p.kernel.sym_name
        kernel.loc = fuse([kernel.loc, p.kernel.loc])
        drop_store(p)
        if not buf.uses and isinstance(buf.owner, BufferOp):
            buf.owner.erase()
        return name
    return None
