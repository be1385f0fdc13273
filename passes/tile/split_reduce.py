from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.kernel import cluster
from irforge.dialects.loop import indexing
from irforge.dialects.tile import fragments
from irforge.dialects.tile.algebra import affine_stores
from irforge.passes.tile.chunk_reduce import identity_init, is_chunk
from irforge.passes.tile.heuristics import heuristic
from irforge.passes.tile.rewrites import substitute
from irforge.passes.tile_to_kernel import clusters

from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option
from irforge.target import target


class TileSplitReduce(Pass):
    """Split a reduction across blocks or a block's warps (split-K, sliced-K, split-row) and combine the shares.

    Where a kernel has too few output tiles (or rows) to fill the GPU, the outermost reduction of a point (a
    contraction's K, a long row's) is cut into `splits` contiguous shares: an outer `tile.reduce` over the shares
    distributed over a block axis nothing uses (y, then z), the original reduction inside it over one share, and a
    `tile.combine ... over blockIdx.y` after it, whose result every block of the point holds. A reduction a
    block's threads share (a `tile.combine` over thread axes follows it) takes that combine into each share. The
    free loops after the combine that threads distribute (a softmax row's write-back) take the block axis too, so
    the blocks of a row share them as well.

    `via` picks how the combine over blocks is made (`tile.combine ... via`): `atomics` (each block adds its share
    of the stored values, which must be an affine function of an add carrier of f32, into an output zeroed
    first), `partials` (each block stores its partial carrier and a second kernel folds them: any monoid, the
    online one included), `cluster` (the shares' blocks, one thread block cluster on sm_90, fold their carriers
    through distributed shared memory in the kernel itself: any monoid, at most 8 shares, once a thread: refused
    where a loop deals a thread several points or a block's threads do not all reach the combine), `auto`
    (atomics where they can, else partials).

    `across=warps` slices the reduction among a block's warps instead (CUTLASS's sliced-K): the shares go over a
    thread axis nothing uses (threadIdx.y), contiguous again but for a chunked reduction, of which each warp takes
    every `splits`-th chunk (at each trip the warps read neighbouring chunks, which `tile-stage-inputs` then stages
    as one box for the whole block), and the `tile.combine ... over threadIdx.y` folds the warps' carriers through
    shared memory in the kernel itself: for a kernel whose blocks already fill the GPU but whose warps are too few
    to keep its memory busy (decode attention of a batch). `auto` slices where passes/tile/heuristics.py says so
    (`split_across`), else splits across blocks.

    A reduction with a non-identity init, or one already split, is left alone (idempotent: a reduction distributed
    over a block axis, or over threadIdx.y holding its share, is a split one), and so is a tensor-core contraction
    whose shares would not be whole atom steps.
    """

    name = "tile-split-reduce"
    input_level = "tile"
    anchor = "kernel"
    splits: int = option(
        0,
        domain=Choices((0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)),
        help="blocks sharing one reduction (0: passes/tile/heuristics.py; 1: none)",
    )
    across: str = option(
        "auto",
        domain=Choices(("auto", "blocks", "warps")),
        help="what shares the reduction: blocks, a block's warps along threadIdx.y (auto: passes/tile/heuristics.py)",
    )
    # declared after `across`: a slice among warps ignores `via`, so the tuner's tree merges its values under it
    via: str = option("auto", domain=Choices(("auto", "atomics", "partials", "cluster")), help="how the blocks combine")

    def check(self, op: Operation) -> str | None:
        if not isinstance(op, T.KernelOp) or self.splits == 1:
            return None
        found = candidates(op)
        if self.across == "warps" and found:
            if _free_axis(op, "warps") is None:
                return "across=warps: the kernel has no thread axis to spare (threadIdx.y is taken)"
            n = op.threads * (self.splits or heuristic().warp_splits(op, found[0][0]))
            if n > target().max_threads:
                return f"across=warps: the block would have {n} threads (the limit is {target().max_threads})"
        if _free_axis(op, self._across(op, None)) is None:
            return None
        for r, shared in found:
            if self.splits > 1 and r.extents[0] % self.splits:
                return f"splits={self.splits} does not divide the reduction's {r.extents[0]} trips"
            if self.across == "warps" and self._shares(op, r, "warps") > 1:
                why = _threads_apart(op, r, "among warps")
                if why:
                    return f"across=warps: {why}"
            shares = self._shares(op, r)
            why = affine_stores(shared or r) if self.via == "atomics" and shares > 1 else None
            if self.via == "cluster" and shares > 1:
                why = cluster.why_not(shares) or _threads_apart(op, r, "through a cluster") or _repeated(op, r)
                why = why or _cluster_misfit(op, r, shared, shares)
            if why is not None and self.across != "warps":
                return f"via={self.via}: {why}"
        return None

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp) or self.splits == 1:
            return
        for r, shared in candidates(op):
            across = self._across(op, r)
            if across == "warps" and (_free_axis(op, across) is None or _threads_apart(op, r, "among warps")):
                if self.across == "warps":  # asked for: a later reduction the first slice left no axis to is kept
                    self.remark(r, "not sliced among warps: threadIdx.y is taken, or not every thread reaches it")
                    continue
                across = "blocks"  # what auto picked, where no thread axis is left or not all meet, falls back
            if _free_axis(op, across) is None:
                continue
            s = self._shares(op, r, across)
            step = fragments.atom_step(r)
            if s > 1 and (r.extents[0] // s) % step:
                self.remark(r, f"not split {s} ways: its tensor-core atom takes {step} iterations a step")
            elif s > 1 and across == "warps" and op.threads * s > target().max_threads:
                self.remark(r, f"not sliced among {s} warps: the block would pass {target().max_threads} threads")
            elif s > 1 and self.via == "cluster" and across == "blocks" and _clustered_elsewhere(op, across):
                self.remark(r, "not split: the kernel combines through a cluster over another axis already")
            elif s > 1:
                comb = split(op, r, shared, s, across)
                if self.via != "auto" and across == "blocks":
                    comb.attributes["via"] = self.via

    def _across(self, kernel: T.KernelOp, r: T.ReduceOp | None) -> str:
        if self.across != "auto":
            return self.across
        return "blocks" if r is None else heuristic().split_across(kernel, r)

    def _shares(self, kernel: T.KernelOp, r: T.ReduceOp, across: str = "blocks") -> int:
        """How many shares `r` is cut into (1: left alone)."""
        h = heuristic()
        s = self.splits or (h.warp_splits(kernel, r) if across == "warps" else h.reduce_splits(kernel, r))
        return s if s > 1 and r.extents[0] % s == 0 and r.extents[0] > s else 1


def candidates(kernel: T.KernelOp) -> list[tuple[T.ReduceOp, T.CombineOp | None]]:
    """(reduction, the combine over threads right after it or None): outermost reductions of a point, not
    vectorized, distributed over thread axes only if a combine over them completes them, their inits the monoids'
    identities."""
    out = []
    for r in kernel.walk():
        if not isinstance(r, T.ReduceOp) or r.vector > 1 or any(a in T.BLOCK_AXES for a in r.bind):
            continue
        if any(isinstance(a, T.ReduceOp) for a in r.ancestors()) or _sliced(r):
            continue
        if tuple(r.attributes["init"]) != identity_init(r):
            continue
        shared = _completing_combine(r)
        if r.bind and shared is None:
            continue
        out.append((r, shared))
    return out


def _sliced(r: T.ReduceOp) -> bool:
    """Whether `r` is a reduction sliced among warps: over threadIdx.y, its body a share with its monoids (and,
    where the share is the block's threads', their combine)."""
    body = [op for op in r.body.ops if not isinstance(op, T.YieldOp)]
    inner = body[0] if body and isinstance(body[0], T.ReduceOp) else None
    share = inner is not None and (len(body) == 1 or body[1:] == [_completing_combine(inner)])
    return "threadIdx.y" in r.bind and share and inner.attributes["monoids"] == r.attributes["monoids"]


def _completing_combine(r: T.ReduceOp) -> T.CombineOp | None:
    """The combine over `r`'s thread axes that takes exactly its results, right after it."""
    block = r.parent.ops
    nxt = block[block.index(r) + 1] if block.index(r) + 1 < len(block) else None
    if isinstance(nxt, T.CombineOp) and tuple(nxt.operands) == tuple(r.results) and set(nxt.over) == set(r.bind):
        return nxt
    return None


def _threads_apart(kernel: T.KernelOp, r: T.ReduceOp, how: str) -> str | None:
    """Why a block's threads would not all meet at a combine `how` (through a cluster, among warps: barriers)
    beside `r` (None: they would): a loop around it whose trips differ between a block's threads."""
    lp = T.uneven_loop(kernel, r)
    if lp is None:
        return None
    return (
        f"a combine {how} needs all of a block's threads, but the loop over {', '.join(lp.bind)} around it gives "
        f"its {lp.units(kernel)} units {lp.work_items} work items"
    )


def _clustered_elsewhere(kernel: T.KernelOp, across: str) -> bool:
    """Whether the kernel combines through a cluster over a block axis other than the one a split `across` blocks
    would take (a launch has one cluster shape: a second reduction of a row, LayerNorm's variance, is left whole)."""
    axis = _free_axis(kernel, across)
    return any(
        isinstance(c, T.CombineOp) and c.attributes.get("via") == "cluster" and c.over[0] != axis for c in kernel.walk()
    )


def _repeated(kernel: T.KernelOp, r: T.ReduceOp) -> str | None:
    """Why a combine through a cluster beside `r` would run more than once a thread (its carriers' buffers and
    barrier serve one combine; `passes/tile_to_kernel/clusters.py`): a reduction around it, or a loop giving its
    units more than one work item each (None: once)."""
    for lp in T.enclosing_loops(r):
        if isinstance(lp, T.ReduceOp) or lp.work_items > lp.units(kernel):
            what = "a reduction" if isinstance(lp, T.ReduceOp) else f"the loop over {', '.join(lp.bind) or 'a thread'}"
            return f"a combine through a cluster runs once a thread, but {what} around it runs it more than once"
    return None


def _cluster_misfit(kernel: T.KernelOp, r: T.ReduceOp, shared: T.CombineOp | None, shares: int) -> str | None:
    """Why the combine of `r` split into `shares` blocks of a cluster could not be materialized
    (`passes/tile_to_kernel/clusters.why_not` on a trial split of a copy: the blocks' carriers in shared memory,
    lower-to-kernel's failure otherwise)."""
    trial = kernel.clone()
    at = {id(x): i for i, x in enumerate(kernel.walk())}
    ops = list(trial.walk())
    comb = split(trial, ops[at[id(r)]], ops[at[id(shared)]] if shared is not None else None, shares)
    comb.attributes["via"] = "cluster"
    why = clusters.why_not(trial, comb)
    trial.erase()  # the copy's uses of the function's buffers go with it
    return why


def _free_axis(kernel: T.KernelOp, across: str) -> str | None:
    """The axis a split `across` blocks or warps would take (None: none is free)."""
    return _free_block_axis(kernel) if across == "blocks" else _free_warp_axis(kernel)


def _free_block_axis(kernel: T.KernelOp) -> str | None:
    used = T.axes_used_within(kernel)
    return next((a for a in T.BLOCK_AXES[1:] if a not in used and kernel.axis_size(a) == 1), None)


def _free_warp_axis(kernel: T.KernelOp) -> str | None:
    """threadIdx.y where nothing uses it (the rows of warps a combine among warps folds across; lower-to-kernel
    materializes that combine over y only)."""
    free = "threadIdx.y" not in T.axes_used_within(kernel) and kernel.axis_size("threadIdx.y") == 1
    return "threadIdx.y" if free and kernel.axis_size("threadIdx.z") == 1 else None


def split(
    kernel: T.KernelOp, r: T.ReduceOp, shared: T.CombineOp | None, splits: int, across: str = "blocks"
) -> T.CombineOp:
    """Cut `r` into `splits` shares over a free block axis, or a free thread axis across=warps (taking `shared`,
    its combine over threads, into each share); returns the combine over that axis that completes them. Shares
    are contiguous, but warps sharing a chunked reduction take every `splits`-th chunk, so that at each trip the
    block's warps read neighbouring chunks (their slabs staged for the whole block as one box)."""
    axis = _free_axis(kernel, across)
    share = r.extents[0] // splits
    part = shared or r  # what each share yields: the block's carrier
    types = [res.type for res in part.results]
    hints = [f"{res.name_hint or 'acc'}_share" for res in part.results]
    outer = T.ReduceOp.build(
        splits, r.attributes["monoids"], r.attributes["init"], types, bind=(axis,),
        iv_hint=f"{r.iv.name_hint or 'r'}_s", result_hints=hints, loc=r.loc,
    )  # fmt: skip
    r.parent.insert_before(r, outer)
    moved = [r] if shared is None else [r, shared]
    for op in moved:
        op.detach()
        outer.body.append(op)
    outer.body.append(T.YieldOp(list(part.results), ()))
    widths = [len(i) for i in r.attributes["init"]]
    comb = T.CombineOp.build(r.attributes["monoids"], widths, outer.results, (axis,), r.loc,
                             [res.name_hint for res in part.results])  # fmt: skip
    outer.parent.insert_after(outer, comb)
    for old, new in zip(part.results, comb.results):
        for user, i in list(old.uses):
            if not outer.is_ancestor_of(user):
                user.set_operand(i, new)
    r.attributes["extent"] = share
    chunked = any(isinstance(x, T.ReduceOp) and is_chunk(x) for x in r.body.ops)
    if across == "warps" and chunked:  # the warps' chunks of a trip side by side: one box to stage
        substitute(r, {r.iv: indexing.ValueDim(r.iv) * splits + indexing.ValueDim(outer.iv)}, r)
    else:
        substitute(r, {r.iv: indexing.ValueDim(outer.iv) * share + indexing.ValueDim(r.iv)}, r)
    kernel.set_axis_size(axis, splits)
    block = comb.parent.ops
    for lp in block[block.index(comb) + 1 :]:  # the blocks of a point share its later thread loops too
        if isinstance(lp, T.ForOp) and lp.bind and all(a in T.THREAD_AXES for a in lp.bind):
            lp.attributes["bind"] = (axis, *lp.bind)
    return comb
