"""lower-to-kernel's rule for a combine over a block axis that goes `via cluster`: the blocks sharing a split
reduction are launched as one thread block cluster (sm_90) and exchange their partial carriers through
distributed shared memory, in the kernel itself.

At the kernel's start each block's first thread initialises an mbarrier, and a cluster barrier follows (no block
may store into another's before that block's barrier exists; the cluster's blocks start together, so it costs
little there). At the combine every thread writes its partial carrier into its rank's slot of its block's buffers
(`[ranks, threads, width]`, a row per thread) and pushes it into the same slot of every other block of the
cluster (`kernel.store_async`: st.async, each store completing its bytes on the receiver's mbarrier); the first
thread announces the bytes its block will receive, every thread waits for them and folds the slots in rank order
(the same order in every block, so all of them hold the same result). No cluster barrier at the combine: a
cluster barrier's release fences every block's memory traffic (on an H100 `barrier.cluster.arrive.release`
compiles to MEMBAR.ALL.GPU and ERRBAR), and the first version of this rule, which read the other blocks' rows
between two of them, spent 12% of the decode attention F4's stall samples there (bench/results/
cluster_stalls-h100-2026-11-28). The combine's blocks hold the same points (the split axis distributes nothing
else), so thread t of one block and thread t of another carry partials of the same points, whatever the layout
(register tiles, mma accumulators). It runs once a thread (one mbarrier phase, one set of slots) and moves 32-bit
values.

It is not the default (a combine without `via` that atomics cannot take goes via partials): the cluster kernels
ran slower than the two kernels of `via partials` they replace, though they save the second kernel (3.5 us of
F4's 29.4). On an H100 (bench/results/cluster_push-h100-2026-11-28) F4 took 30.1-30.6 us against 29.3-29.5,
F6 67.8-68.3 against 53.9-54.0, the split-K products L12 83 against 56 and L4 27 against 12. Launching F4's first
kernel in clusters alone, remote memory untouched, cost 0.6 us of it (cluster_launch-h100-2026-11-28), so most
of the loss is the exchange itself, not found further. `tile-split-reduce`'s `via=cluster` asks for it, and the
tuner tries it.
"""

from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.kernel import cluster
from irforge.dialects.kernel.builder import Val
from irforge.dialects.kernel.types import FragType, MbarrierType, SmemType, element_type, per_thread_shape
from irforge.dialects.tile.workspace import cluster_carrier_bytes, via_cluster

from irforge import index_expr as ix
from irforge.ir import Block
from irforge.target import target
from irforge.types import TensorType, index

from . import memory, partials
from .emit import combine_values, value_hint

MBARRIER_TX_LIMIT = 1 << 20  # transaction bytes an mbarrier phase can count


def why_not(kernel: T.KernelOp, comb: T.CombineOp) -> str | None:
    """Why a combine over a block axis cannot go via a cluster (None when it can)."""
    axis = comb.over[0]
    n = partials.shares(kernel, comb)
    why = cluster.why_not(n)
    if why is not None:
        return why
    axes = {c.over[0] for c in kernel.walk() if isinstance(c, T.CombineOp) and via_cluster(c)}
    if len(axes) > 1:
        return f"the kernel combines via clusters over {' and '.join(sorted(axes))}; a launch has one cluster shape"
    if kernel.axis_size(axis) != n:
        return f"the kernel has {kernel.axis_size(axis)} blocks along {axis}, not the {n} that share the reduction"
    for lp in T.enclosing_loops(comb):
        if isinstance(lp, T.ReduceOp) or lp.work_items > lp.units(kernel):
            return "it runs more than once a thread (its carriers' buffers and barrier serve one combine)"
    wide = next((r.type for r in comb.results if r.type.bytes != 4), None)
    if wide is not None:
        return f"its carrier has {wide} components; blocks exchange 32-bit values"
    if memory.producer_stages(kernel):
        return "a kernel with a producer warp (the rule places the carriers of the block's own threads only)"
    nbytes = cluster_carrier_bytes(kernel, comb)
    if nbytes > target().smem_per_block or (n - 1) * nbytes // n >= MBARRIER_TX_LIMIT:
        return f"its blocks' carriers take {nbytes} bytes of shared memory, more than a block or an mbarrier holds"
    return None


def cluster_shape(axis: str, n: int) -> tuple[int, int, int]:
    return tuple(n if a == axis else 1 for a in T.BLOCK_AXES)


def combine(m, op: T.CombineOp) -> None:
    kb = m.kb
    axis = op.over[0]
    n = m.tk.axis_size(axis)
    kb.op.attributes["cluster"] = cluster_shape(axis, n)
    me = Val(m.axis(axis))  # the block's rank: the cluster spans the axis
    bar = m.smem(MbarrierType(1), "carriers_in")
    _init_at_entry(m, bar)
    row = kb.index(m.linear_thread(), "lin")
    carriers, rows, nbytes = [], [], 0
    for monoid, _, vals in op.carriers:
        comps = []
        for v in vals:
            c = m.get(v)
            if isinstance(c.type, FragType):
                c = kb.reshape(c, TensorType(c.type.dtype, per_thread_shape(c.type)))
            width = max(1, TensorType(element_type(c.type), per_thread_shape(c.type)).numel)
            buf = m.smem(SmemType(element_type(c.type), (n, m.tk.threads, width)), f"{c.name_hint or 'carrier'}_rows")
            flat = c if width == 1 and not isinstance(c.type, TensorType) else kb.reshape(c, _row(c, width))
            at = [me, Val(row), ix.Const(0)]
            _vector(kb.store(flat, buf, at), flat.type)
            with kb.for_(1, n, hint="to", unroll=0) as lp:
                kb.store_async(flat, buf, at, bar, ix.Const(0), (me + Val(lp.iv)) % n)
            rows.append((buf, c.type, flat.type))
            nbytes += (n - 1) * m.tk.threads * width * element_type(c.type).bytes
            comps.append(c)
        carriers.append((monoid, comps))
    with kb.if_(kb.scalar("eq", row, kb.const(0, index))) as br, br.then():
        kb.mbarrier_arrive(bar, ix.Const(0), expect_tx=nbytes)
    kb.mbarrier_wait(bar, ix.Const(0), ix.Const(0))
    out, at = [], 0
    for monoid, comps in carriers:
        mine = rows[at : at + len(comps)]
        at += len(comps)
        ids = [kb.const(monoid.identity(element_type(t), i), t) for i, (_, t, _) in enumerate(mine)]
        with kb.for_(0, n, carries=ids, hint="rank", unroll=0) as lp:
            got = []
            for buf, t, flat_t in mine:
                ld = kb.load(buf, [Val(lp.iv), Val(row), ix.Const(0)], flat_t)
                _vector(ld.owner, flat_t)
                got.append(ld if flat_t == t else kb.reshape(ld, t))
            lp.yield_(*combine_values(kb, monoid, lp.carries, got))
        out += lp.results
    for r, v in zip(op.results, out):
        v.name_hint = value_hint(r) or v.name_hint
        m.env[r] = v


def _init_at_entry(m, bar) -> None:
    """The mbarrier initialised by the block's first thread at the kernel's start, then a cluster barrier: no block
    stores into another's before that block's barrier exists (the cluster's blocks start together, so it costs
    little there; before the combine it would wait for every block's stores to drain)."""
    kb = m.kb
    first = m.linear_thread()
    entry = Block()
    with kb.at(entry):
        lin = kb.index(first, "lin")
        with kb.if_(kb.scalar("eq", lin, kb.const(0, index))) as br, br.then():
            kb.mbarrier_init(bar, ix.Const(0), 1)
        kb.cluster_barrier()
    for op in list(entry.ops):
        op.detach()
        kb.op.body.insert(m.n_top, op)
        m.n_top += 1


def _row(c, width: int) -> TensorType:
    return TensorType(element_type(c.type), (width,))


def _vector(access, t) -> None:
    """Vector accesses of at most 16 bytes that divide the row (a row of 3 floats moves a float at a time)."""
    if not isinstance(t, TensorType):
        return
    nbytes = t.numel * t.dtype.bytes
    if nbytes % 16 == 0 or (nbytes <= 16 and nbytes & (nbytes - 1) == 0):
        return
    w = max(1, min(16 // t.dtype.bytes, t.numel))
    while t.numel % w:
        w //= 2
    access.attributes["vector"] = w
