"""Thread block clusters: a cluster's blocks run together (their warps scheduled side by side), a cluster barrier
releases when every warp of every block of the cluster waits at it, and loads through `kernel.cluster_map` read
another block's shared buffer, checked like local reads but at the cluster's barriers: a remote read must follow
the write by a cluster barrier, a write must not overwrite what another block read since the last one, and a
block's shared memory is gone once the block has exited. A `kernel.store_async` lands in the receiving block when
its mbarrier takes it (at its wait, or when nothing else can move), like a TMA copy: read before, it is an error."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .state import SharedBuffer


class ClusterState:
    """What a cluster's blocks share: themselves by rank (x fastest over the cluster's shape), the barrier count."""

    def __init__(self, blocks: list):
        self.blocks = blocks
        self.epoch = 0


@dataclass
class RemoteShared:
    """Another block's shared buffer, as `kernel.cluster_map` names it."""

    buffer: SharedBuffer
    owner: object  # the BlockSim that holds it

    @property
    def type(self):
        return self.buffer.type

    @property
    def data(self):
        return self.buffer.data


def clusters(grid, shape):
    """The blocks of each cluster of a launch, each list by rank."""
    cx, cy, cz = shape
    for z0, y0, x0 in itertools.product(range(0, grid[2], cz), range(0, grid[1], cy), range(0, grid[0], cx)):
        yield [(x0 + x, y0 + y, z0 + z) for z in range(cz) for y in range(cy) for x in range(cx)]


def run_cluster(blocks: list) -> None:
    """Run a cluster's blocks (BlockSims, by rank) to their end together."""
    state = ClusterState(blocks)
    for b in blocks:
        b.cluster = state
        b.start()
    while any(b.live for b in blocks):
        progressed = False
        for b in blocks:
            if b.live:
                progressed |= b.step()
        waiting = [(b, w) for b in blocks for w in b.live if w.waiting is not None and w.waiting[0] == "cluster"]
        if waiting and len(waiting) == sum(len(b.live) for b in blocks):
            _release(blocks, waiting, state)
            progressed = True
        if not progressed:
            for b in blocks:
                if any(w.waiting[0] != "cluster" for w in b.live):
                    b.stuck()
            b, w = waiting[0]
            raise b._error(w.waiting[1], "deadlock at this cluster barrier", w)
    for b in blocks:
        b.finish()


def _release(blocks, waiting, state: ClusterState) -> None:
    b0, w0 = waiting[0]
    ended = next((b for b in blocks if len(b.live) != len(b.warps)), None)
    if ended is not None:
        raise b0._error(
            w0.waiting[1],
            f"waits at this cluster barrier, but block {tuple(ended.block_idx)} has threads that finished (every"
            " thread of every block of the cluster must reach each cluster barrier)",
            w0,
        )
    other = next(((b, w) for b, w in waiting if w.waiting[1] is not w0.waiting[1]), None)
    if other is not None:
        b, w = other
        raise b._error(w.waiting[1], "waits at this cluster barrier while other warps wait at another", w)
    for b in blocks:
        b._check_unwritten_reads()
        b.epoch += 1
    for _, w in waiting:
        w.waiting = None
    state.epoch += 1


# ---- handlers ----------------------------------------------------------------------------------------------------
def _cluster_barrier(sim, op, values, mask, w, env):
    if not mask.all():
        raise sim._error(op, "cluster barrier reached by only part of the warp (in divergent control flow)", w)
    yield ("cluster", op)


def _cluster_map(sim, op, values, mask, w, env):
    (rank,) = sim._index(op, "rank", values, mask, w)
    ranks = np.unique(rank[mask])
    if len(ranks) != 1:
        raise sim._error(op, f"maps ranks {ranks.tolist()} in one warp; the simulator takes one rank a warp", w)
    r = int(ranks[0])
    blocks = sim.cluster.blocks
    if not 0 <= r < len(blocks):
        raise sim._error(op, f"maps rank {r}, outside the cluster's {len(blocks)} blocks", w)
    owner = blocks[r]
    buf = owner.shared[op.operands[0]]
    values[op.result] = buf if owner is sim else RemoteShared(buf, owner)


def _store_async(sim, op, values, mask, w, env):
    """Each lane's value lands in the receiving block's buffer when that block's mbarrier takes it (its wait, or
    when nothing else can move): until then the addresses are pending, and a read of them is an error."""
    from .accesses import _addresses
    from .state import _per_thread

    (rank,) = sim._index(op, "rank", values, mask, w)
    (bi,) = sim._index(op, "bar_index", values, mask, w)
    t = op.value.type
    data = np.asarray(values[op.value]).reshape(len(mask), -1)
    nbytes = int(np.prod(_per_thread(t), dtype=np.int64)) * 4
    blocks = sim.cluster.blocks
    for lane in np.flatnonzero(mask):
        r, k = int(rank[lane]), int(bi[lane])
        if not 0 <= r < len(blocks):
            raise sim._error(op, f"stores to rank {r}, outside the cluster's {len(blocks)} blocks", w, int(lane))
        owner = blocks[r]
        dst, bars = owner.shared[op.mem], owner.shared[op.bar].bars
        if not 0 <= k < len(bars):
            raise sim._error(op, f"mbarrier index {k} is outside the array of {len(bars)}", w, int(lane))
        if not bars[k].initialized:
            raise sim._error(
                op,
                f"completes on an mbarrier of block {tuple(owner.block_idx)} that is not initialised yet (a cluster"
                " barrier after its init?)",
                w,
                int(lane),
            )
        one = np.zeros(len(mask), dtype=bool)
        one[lane] = True
        a = _addresses(sim, op, "index", dst, values, one, w, t)[lane]
        if dst.pending[a].any():
            raise sim._error(op, "stores into shared memory an async copy is still filling", w, int(lane))
        dst.pending[a] = True
        bars[k].transactions.append((dst, a, data[lane].copy(), nbytes))


# ---- race checks ---------------------------------------------------------------------------------------------------
def check_remote_read(sim, op, mem: RemoteShared, a, tids, w) -> None:
    owner, buf, e = mem.owner, mem.buffer, sim.cluster.epoch
    where = f"block {tuple(sim.block_idx)}, {sim._thread_name(int(tids[0]))}"
    if not owner.live:
        raise op.error(
            f"reads the shared memory of block {tuple(owner.block_idx)}, which has exited (a cluster barrier after the"
            f" last remote read keeps it) [{where}]"
        )
    bad = buf.pending[a] | ~buf.written[a]
    if bad.any():
        k = int(np.argmax(bad))
        raise op.error(
            f"reads shared address {int(a[k])} of block {tuple(owner.block_idx)}, which nothing has written yet"
            f" [{where}]"
        )
    raw = buf.w_cluster[a] == e
    if raw.any():
        k = int(np.argmax(raw))
        raise op.error(
            f"race: reads shared address {int(a[k])} of block {tuple(owner.block_idx)}, written since the last"
            f" cluster barrier (missing kernel.cluster_barrier?) [{where}]"
        )
    buf.r_cluster[a] = e


def check_write_after_remote_read(sim, op, mem: SharedBuffer, a, tids) -> None:
    if sim.cluster is None:
        return
    war = mem.r_cluster[a] == sim.cluster.epoch
    if war.any():
        k = int(np.argmax(war))
        raise op.error(
            f"race: overwrites shared address {int(a[k])}, which another block of the cluster read since the last"
            f" cluster barrier (missing kernel.cluster_barrier?) [block {tuple(sim.block_idx)},"
            f" {sim._thread_name(int(tids[k]))}]"
        )
    mem.w_cluster[a] = sim.cluster.epoch
