"""Memory accesses: the addresses of loads, stores and atomics (bounds, alignment, swizzles), and the race checks
every read and write of global and shared memory goes through."""

from __future__ import annotations

import numpy as np

from irforge.scalar_ops import SCALAR_OPS, compute_dtype, quantize
from irforge.types import ScalarType, TensorType

from .. import ops as K
from .cluster import RemoteShared, check_remote_read, check_write_after_remote_read
from .state import _MANY, _NO_THREAD, GlobalBuffer, SharedBuffer, Warp, _per_thread


def _layout(sim, op, t) -> tuple[int, np.ndarray, np.ndarray]:
    """(run, element offsets, runs) of an access of `t`: every element's offset from the address (a strided tile's
    `strides`, else contiguous), and the tile positions of each run of `run` contiguous elements (a row each).
    Worked out once per access and type in a launch (a loop runs an access many times)."""
    key = (op, t)
    if key not in sim.layouts:
        sim.layouts[key] = _access_layout(op, t)
    return sim.layouts[key]


def _access_layout(op, t) -> tuple[int, np.ndarray, np.ndarray]:
    if not isinstance(t, TensorType):
        return 1, np.zeros(1, dtype=np.int64), np.zeros((1, 1), dtype=np.int64)
    strides = op.attributes.get("strides") or K.default_strides(t.shape)
    run, runs = K.access_runs(t, strides, op.attributes.get("vector"))
    offsets = np.asarray(K.tile_offsets(t.shape, strides), dtype=np.int64)
    return run, offsets, np.asarray([p for _, p in runs], dtype=np.int64)


def _addresses(sim, op, group, mem, values, mask, w, t) -> np.ndarray:
    """Flat element addresses (lanes x elements) of an access of `t` (a scalar, or a contiguous or strided tile) at
    `mem[group]`."""
    idx = sim._index(op, group, values, mask, w)
    run, offsets, runs = _layout(sim, op, t)
    if isinstance(mem, GlobalBuffer):
        base = idx[0]
        addrs = base[:, None] + offsets
        bad = mask & ((addrs.min(axis=1) < 0) | (addrs.max(axis=1) >= mem.numel))
        if bad.any():
            lane = int(np.argmax(bad))
            raise sim._error(
                op,
                f"accesses {mem.name} at element {int(base[lane])} (+{int(offsets.max()) + 1}), outside its"
                f" {mem.numel} elements",
                w,
                lane,
            )
        _check_aligned(sim, op, addrs[:, runs[:, 0]], mem.dtype, run, mask, w)
        return addrs
    t_mem = mem.type
    for i, size in zip(idx, t_mem.shape):
        bad = mask & ((i < 0) | (i >= size))
        if bad.any():
            lane = int(np.argmax(bad))
            pos = [int(x[lane]) for x in idx]
            raise sim._error(op, f"accesses shared memory at {pos}, outside {t_mem}", w, lane)
    first = sum(i * s for i, s in zip(idx, t_mem.strides))
    lin = first[:, None] + offsets
    if op.attributes.get("xor_runs"):  # the CUDA addresses run c as swz(first) ^ swz(c): only first + c == first ^ c
        shared = mask & ((first[:, None] & offsets[runs[:, 0]]) != 0).any(axis=1)
        if shared.any():
            lane = int(np.argmax(shared))
            raise sim._error(op, f"xor_runs: a run's offset shares bits with offset {int(first[lane])}", w, lane)
    row = t_mem.shape[-1]
    starts = lin[:, runs[:, 0]]
    bad = mask & ((lin.min(axis=1) < 0) | (lin.max(axis=1) >= t_mem.numel) | ((starts % row + run > row).any(axis=1)))
    if bad.any():
        lane = int(np.argmax(bad))
        pos = [int(x[lane]) for x in idx]
        raise sim._error(
            op, f"accesses shared memory at {pos} (+{int(offsets.max()) + 1}), outside {t_mem} or across a row", w, lane
        )
    addrs = _swizzle(lin, t_mem.swizzle)
    if t_mem.swizzle and run > 1:
        moved = addrs[:, runs]
        split = mask & (moved != moved[:, :, :1] + np.arange(run)).any(axis=(1, 2))
        if split.any():
            raise sim._error(
                op, f"a vector of {run} elements crosses a swizzle unit of {t_mem}", w, int(np.argmax(split))
            )
    _check_aligned(sim, op, addrs[:, runs[:, 0]], t_mem.dtype, run, mask, w)
    return addrs


def _swizzle(off: np.ndarray, sw) -> np.ndarray:
    if not sw:
        return off
    b, m, s = sw
    return off ^ (((off >> (m + s)) & ((1 << b) - 1)) << m)


def _check_aligned(sim, op, starts, dtype, run, mask, w) -> None:
    """Every run of `run` contiguous elements (their first addresses: `starts`, lanes x runs) starts aligned to its
    vector access (16 bytes, or the run if smaller)."""
    nbytes = run * dtype.bytes
    access = min(nbytes, 16)
    if access <= dtype.bytes:
        return
    misaligned = (starts * dtype.bytes) % access != 0
    bad = mask & misaligned.any(axis=1)
    if bad.any():
        lane = int(np.argmax(bad))
        at = int(starts[lane][np.argmax(misaligned[lane])])
        raise sim._error(op, f"a {access}-byte vector access at element {at} is not {access}-byte aligned", w, lane)


def _threads(w: Warp, mask, n: int) -> np.ndarray:
    return np.repeat(w.lanes[mask], n)


def _global_tid(sim, tids):
    return sim.block_linear * sim.nthreads + tids


def _read(sim, op, mem, addrs, mask, w) -> np.ndarray:
    """Values at `addrs` for the active lanes (zeros elsewhere), after the race checks."""
    n = addrs.shape[1]
    a = addrs[mask].reshape(-1)
    tids = _threads(w, mask, n)
    if isinstance(mem, GlobalBuffer):
        _check_before_wait(sim, op, mem, a, w, "reads")
        _check_global_read(sim, op, mem, a, tids, w)
    elif isinstance(mem, RemoteShared):
        check_remote_read(sim, op, mem, a, tids, w)
    else:
        _check_shared_read(sim, op, mem, a, tids, w)
    out = np.zeros(addrs.shape, dtype=mem.data.dtype)
    out[mask] = mem.data[addrs[mask]]
    return out


def _write(sim, op, mem, addrs, vals, mask, w) -> None:
    n = addrs.shape[1]
    a = addrs[mask].reshape(-1)
    tids = _threads(w, mask, n)
    v = np.asarray(vals)[mask].reshape(-1)
    if isinstance(mem, GlobalBuffer):
        _check_before_wait(sim, op, mem, a, w, "writes")
        _check_global_write(sim, op, mem, a, tids, w)
        mem.w_launch[a] = sim.launch_id
        mem.w_thread[a] = _global_tid(sim, tids)
        mem.w_epoch[a] = sim.epoch
    elif isinstance(mem, RemoteShared):
        raise sim._error(op, "writes another block's shared memory, which the simulator does not model", w)
    else:
        _check_shared_write(sim, op, mem, a, tids, w)
        check_write_after_remote_read(sim, op, mem, a, tids)
        mem.w_thread[a] = tids
        mem.w_epoch[a] = sim.epoch
    mem.data[a] = quantize(v, mem.dtype if isinstance(mem, GlobalBuffer) else mem.type.dtype)
    mem.written[a] = True


def _duplicate_writers(a, tids):
    """(address, thread, other thread) of two different threads writing one address in this step, or None."""
    if len(a) < 2:
        return None
    order = np.lexsort((tids, a))
    sa, st = a[order], tids[order]
    clash = (sa[1:] == sa[:-1]) & (st[1:] != st[:-1])
    if clash.any():
        k = int(np.argmax(clash))
        return int(sa[k]), int(st[k]), int(st[k + 1])
    return None


def _check_shared_write(sim, op, mem: SharedBuffer, a, tids, w) -> None:
    _check_shared_write_order(sim, op, mem, a, tids)
    dup = _duplicate_writers(a, tids)
    if dup is not None:
        addr, t1, t2 = dup
        raise op.error(
            f"race: {sim._thread_name(t1)} and {sim._thread_name(t2)} write shared address {addr} in the same step"
            f" [block {tuple(sim.block_idx)}]"
        )
    e = sim.epoch
    pend = mem.pending[a]
    if pend.any():
        k = int(np.argmax(pend))
        raise op.error(
            f"writes shared address {int(a[k])} while an async copy into it is in flight"
            f" [block {tuple(sim.block_idx)}, {sim._thread_name(int(tids[k]))}]"
        )
    ww = (mem.w_epoch[a] == e) & (mem.w_thread[a] != tids) & (mem.w_thread[a] >= 0)
    if ww.any():
        k = int(np.argmax(ww))
        raise op.error(
            f"race: {sim._thread_name(int(tids[k]))} writes shared address {int(a[k])}, which"
            f" {sim._thread_name(int(mem.w_thread[a[k]]))} wrote since the last barrier (missing kernel.barrier?)"
            f" [block {tuple(sim.block_idx)}]"
        )
    r = mem.r_thread[a]
    war = (mem.r_epoch[a] == e) & (r != _NO_THREAD) & (r != tids)
    if war.any():
        k = int(np.argmax(war))
        who = "several threads" if r[k] == _MANY else sim._thread_name(int(r[k]))
        raise op.error(
            f"race: {sim._thread_name(int(tids[k]))} overwrites shared address {int(a[k])}, which {who} read since"
            f" the last barrier (missing kernel.barrier?) [block {tuple(sim.block_idx)}]"
        )


def _check_shared_write_order(sim, op, mem: SharedBuffer, a, tids) -> None:
    """A write that lands after another thread already read the (then unwritten) address in this epoch."""
    if mem.unwritten_reads:
        for addr, t in zip(a.tolist(), tids.tolist()):
            early = mem.unwritten_reads.get(addr)
            if early is not None and early[1] != t:
                raise early[0].error(
                    f"race: {sim._thread_name(early[1])} reads shared address {addr} before {sim._thread_name(t)}"
                    f" writes it, with no barrier between them (missing kernel.barrier?) [block {tuple(sim.block_idx)}]"
                )


def _check_shared_read(sim, op, mem: SharedBuffer, a, tids, w) -> None:
    e = sim.epoch
    where = f"block {tuple(sim.block_idx)}"
    pend = mem.pending[a]
    if pend.any():
        k = int(np.argmax(pend))
        raise op.error(
            f"reads shared address {int(a[k])} before the async copy into it completed (missing cp_async_wait or"
            f" mbarrier_wait?) [{where}, {sim._thread_name(int(tids[k]))}]"
        )
    for k in np.flatnonzero(~mem.written[a]):
        mem.unwritten_reads.setdefault(int(a[k]), (op, int(tids[k])))
    raw = (mem.w_epoch[a] == e) & (mem.w_thread[a] >= 0) & (mem.w_thread[a] != tids)
    if raw.any():
        k = int(np.argmax(raw))
        raise op.error(
            f"race: {sim._thread_name(int(tids[k]))} reads shared address {int(a[k])}, which"
            f" {sim._thread_name(int(mem.w_thread[a[k]]))} wrote since the last barrier (missing kernel.barrier?)"
            f" [{where}]"
        )
    # Record readers: one thread, or _MANY once a second thread reads the address in this epoch. Sorted by address
    # then thread, an address's readers are one thread when its first and last are the same, and the reader it
    # had in this epoch (if any) is that thread too.
    fresh = mem.r_epoch[a] != e
    prev = np.where(fresh, _NO_THREAD, mem.r_thread[a])
    order = np.lexsort((tids, a))
    sa, st, sp = a[order], tids[order], prev[order]
    first = np.ones(len(sa), dtype=bool)
    first[1:] = sa[1:] != sa[:-1]
    starts = np.flatnonzero(first)
    ends = np.append(starts[1:], len(sa)) - 1
    lo, p = st[starts], sp[starts]
    single = (lo == st[ends]) & ((p == _NO_THREAD) | (p == lo))
    mem.r_thread[sa[starts]] = np.where(single, lo, _MANY)
    mem.r_epoch[sa[starts]] = e


def _check_before_wait(sim, op, mem: GlobalBuffer, a, w, what: str) -> None:
    """A dependent launch touches what the launch before it writes only after its kernel.griddepcontrol_wait."""
    if not sim.dependent or w.griddep_waited:
        return
    early = mem.w_launch[a] == sim.launch_id - 1
    if early.any():
        raise sim._error(
            op,
            f"{what} element {int(a[int(np.argmax(early))])} of {mem.name} before kernel.griddepcontrol_wait, but the"
            " launch before this one writes it and may still be running",
            w,
        )


def _check_global_write(sim, op, mem: GlobalBuffer, a, tids, w) -> None:
    g = _global_tid(sim, tids)
    dup = _duplicate_writers(a, g)
    if dup is not None:
        addr, t1, t2 = dup
        raise op.error(
            f"race: two threads write element {addr} of {mem.name} in the same step"
            f" [block {tuple(sim.block_idx)}, {sim._thread_name(t1 % sim.nthreads)}"
            f" and {sim._thread_name(t2 % sim.nthreads)}]"
        )
    same = (mem.w_launch[a] == sim.launch_id) & (mem.w_thread[a] != g) & (mem.w_thread[a] >= 0)
    if same.any():
        k = int(np.argmax(same))
        other = int(mem.w_thread[a[k]])
        ob, ot = divmod(other, sim.nthreads)
        raise op.error(
            f"race: element {int(a[k])} of {mem.name} is written by two threads in one launch (block {ob},"
            f" {sim._thread_name(ot)} wrote it first) [block {tuple(sim.block_idx)},"
            f" {sim._thread_name(int(tids[k]))}]"
        )


def _check_global_read(sim, op, mem: GlobalBuffer, a, tids, w) -> None:
    unwritten = ~mem.written[a]
    if unwritten.any():
        k = int(np.argmax(unwritten))
        raise op.error(
            f"reads element {int(a[k])} of {mem.name}, which nothing has written"
            f" [block {tuple(sim.block_idx)}, {sim._thread_name(int(tids[k]))}]"
        )
    g = _global_tid(sim, tids)
    wt = mem.w_thread[a]
    this = (mem.w_launch[a] == sim.launch_id) & (wt >= 0) & (wt != g)
    other_block = this & (wt // sim.nthreads != sim.block_linear)
    same_epoch = this & (mem.w_epoch[a] == sim.epoch)
    bad = other_block | same_epoch
    if bad.any():
        k = int(np.argmax(bad))
        ob, ot = divmod(int(wt[k]), sim.nthreads)
        why = (
            "another block wrote it in this launch"
            if other_block[k]
            else "another thread wrote it since the last barrier"
        )
        raise op.error(
            f"race: reads element {int(a[k])} of {mem.name}, but {why} (block {ob}, {sim._thread_name(ot)})"
            f" [block {tuple(sim.block_idx)}, {sim._thread_name(int(tids[k]))}]"
        )


def _mem_dtype(mem) -> ScalarType:
    return mem.dtype if isinstance(mem, GlobalBuffer) else mem.type.dtype


def _load(sim, op, values, mask, w, env):
    mem = values[op.mem]
    addrs = _addresses(sim, op, "index", mem, values, mask, w, op.result.type)
    v = _read(sim, op, mem, addrs, mask, w)
    values[op.result] = v.reshape((len(mask), *_per_thread(op.result.type)))


def _store(sim, op, values, mask, w, env):
    mem = values[op.mem]
    addrs = _addresses(sim, op, "index", mem, values, mask, w, op.value.type)
    _write(sim, op, mem, addrs, values[op.value].reshape(len(mask), -1), mask, w)


def _atomic(sim, op, values, mask, w, env):
    mem = values[op.mem]
    addrs = _addresses(sim, op, "index", mem, values, mask, w, op.value.type)
    x = values[op.value].reshape(len(mask), -1)
    dtype = _mem_dtype(mem)
    fn = SCALAR_OPS[{"add": "add", "max": "maximum", "min": "minimum"}[op.attributes["kind"]]]
    for lane in np.flatnonzero(mask):
        for a, v in zip(addrs[lane], x[lane]):
            a = int(a)
            if not mem.written[a]:
                raise sim._error(op, f"atomically updates element {a}, which nothing has written", w, int(lane))
            cur = mem.data[a : a + 1].astype(compute_dtype(dtype))
            mem.data[a] = quantize(fn.numpy(cur, np.asarray([v]).astype(compute_dtype(dtype))), dtype)[0]
    if isinstance(mem, GlobalBuffer):
        mem.w_launch[addrs[mask].reshape(-1)] = -1  # atomics order themselves: later plain accesses are not checked
