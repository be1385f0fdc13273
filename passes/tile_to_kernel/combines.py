"""lower-to-kernel's rule for `tile.combine` over threadIdx.x: an xor-shuffle ladder within each warp (written
once as a loop over the offsets, unrolled when printed), then, past 32 threads, each warp's carrier through shared
memory, a barrier, every thread folding its row's partials, a barrier. Blocks that are not whole warps combine
through shared memory alone (shuffles need all 32 lanes)."""

from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.kernel.builder import Val
from irforge.dialects.kernel.types import SmemType
from irforge.dialects.tile.vectors import Lanes

from irforge import index_expr as ix
from irforge.ir import Operation
from irforge.target import target
from irforge.types import boolean, index

from .emit import combine_values, value_hint


def why_not(kernel: T.KernelOp, op: Operation) -> str | None:
    if not isinstance(op, T.CombineOp):
        return None
    if op.over != ("threadIdx.x",):
        return f"combines over {', '.join(op.over)}; only combines over threadIdx.x are materialized yet"
    bx = kernel.axis_size("threadIdx.x")
    if bx & (bx - 1):
        return f"combines over {bx} threads along threadIdx.x; the shuffle ladder needs a power of two"
    lanes = Lanes()
    if any(lanes.of(v) for v in op.operands):
        return "combines register tiles (a reduction shared by threads inside a vectorized loop)"
    return None


def combine(m, op: T.CombineOp) -> None:
    n = m.tk.axis_size("threadIdx.x")
    carriers = [(monoid, [m.get(v) for v in vals]) for monoid, _, vals in op.carriers]
    if n == 1:  # one thread along x: its carrier is the combine
        for r, v in zip(op.results, op.operands):
            m.env[r] = m.env[v]
        return
    warp = target().warp_size
    if m.tk.threads % warp:  # a partial warp: shuffles need all its lanes, so go through shared memory
        carriers = _through_smem(m, carriers, n, 1)
    else:
        carriers = _butterfly(m, carriers, min(n, warp))
        if n > warp:
            carriers = _through_smem(m, carriers, n // warp, warp)
    for r, v in zip(op.results, [v for _, comps in carriers for v in comps]):
        v.name_hint = value_hint(r) or v.name_hint
        m.env[r] = v


def _butterfly(m, carriers, width: int):
    """The xor-shuffle ladder over `width` lanes (offsets width/2 .. 1) as one loop carrying the carriers and the
    offset, unrolled when printed: its combine program appears once in the IR."""
    kb = m.kb
    steps = width.bit_length() - 1
    if steps == 0:
        return carriers
    flat = [c for _, comps in carriers for c in comps]
    first = kb.const(width // 2, index)
    full = target().warp_size
    with kb.for_(0, steps, carries=[*flat, first], hint="step", unroll=0) as lp:
        *cur, off = lp.carries
        off.name_hint = "offset"
        new, at = [], 0
        for monoid, comps in carriers:
            mine = cur[at : at + len(comps)]
            other = [kb.shfl("xor", c, Val(off), width=width if width < full else None) for c in mine]
            new += combine_values(kb, monoid, mine, other)
            at += len(comps)
        lp.yield_(*new, kb.index(Val(off) // 2))
    out, at = [], 0
    for monoid, comps in carriers:
        warp = lp.results[at : at + len(comps)]
        for c, r in zip(comps, warp):
            r.name_hint = f"{c.name_hint}_warp" if c.name_hint else None
        out.append((monoid, warp))
        at += len(comps)
    return out


def _through_smem(m, carriers, slots: int, every: int):
    """The carriers of every `every`-th thread along x (a warp's first lane, or each thread) into shared memory, a
    barrier, then every thread folds its row's `slots` carriers."""
    kb = m.kb
    rows = m.tk.axis_size("threadIdx.y") * m.tk.axis_size("threadIdx.z")
    row = ix.Const(0)
    for a in ("threadIdx.z", "threadIdx.y"):
        row = row * m.tk.axis_size(a) + (Val(m.axis(a)) if m.tk.axis_size(a) > 1 else 0)
    tx = Val(m.axis("threadIdx.x"))
    parts = [[m.smem(SmemType(c.type, (rows, slots)), "partial") for c in comps] for _, comps in carriers]

    def publish():
        for (_, comps), bufs in zip(carriers, parts):
            for c, buf in zip(comps, bufs):
                kb.store(c, buf, [row, tx // every])

    if every > 1:
        lane = kb.index(tx % every, "lane")
        with kb.if_(kb.scalar("eq", lane, kb.const(0, index))) as br, br.then():
            publish()
    else:
        publish()
    kb.barrier()
    out = []
    for (monoid, comps), bufs in zip(carriers, parts):
        types = [c.type for c in comps]
        ids = [kb.const(_typed(monoid.identity(t, i), t), t) for i, t in enumerate(types)]
        with kb.for_(0, slots, carries=ids, hint="k") as lp:
            got = [kb.load(buf, [row, Val(lp.iv)], t) for buf, t in zip(bufs, types)]
            lp.yield_(*combine_values(kb, monoid, lp.carries, got))
        out.append((monoid, lp.results))
    kb.barrier()  # the partials are read before a later combine may overwrite them
    return out


def _typed(value, t):
    """A monoid identity as a constant of type `t` (identities are Python numbers of any kind)."""
    return float(value) if t.is_float else bool(value) if t == boolean else int(value)
