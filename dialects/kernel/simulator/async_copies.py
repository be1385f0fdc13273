"""Asynchronous copies: cp.async groups, mbarrier phases with their transaction bytes, TMA boxes."""

from __future__ import annotations

import numpy as np

from .accesses import _addresses, _check_shared_write, _read, _swizzle, _threads
from .state import _NO_THREAD, Mbarrier


def _cp_async(sim, op, values, mask, w, env):
    src, dst = values[op.src], values[op.dst]
    chunk = op.attributes["chunk"]
    n = chunk.numel
    sa = _addresses(sim, op, "src_index", src, values, mask, w, chunk)
    da = _addresses(sim, op, "dst_index", dst, values, mask, w, chunk)
    data = _read(sim, op, src, sa, mask, w)
    a = da[mask].reshape(-1)
    tids = _threads(w, mask, n)
    _check_shared_write(sim, op, dst, a, tids, w)
    dst.pending[a] = True
    w.open_group.append((op, dst, a, tids, data[mask].reshape(-1)))


def _cp_async_commit(sim, op, values, mask, w, env):
    w.groups.append(w.open_group)
    w.open_group = []


def _cp_async_wait(sim, op, values, mask, w, env):
    keep = op.attributes["pending"]
    while len(w.groups) > keep:
        for rec in w.groups.pop(0):
            sim._land_cp_async(rec, w)


def _bar_states(sim, op, values, mask, w, group: str = "index") -> list[tuple[int, Mbarrier]]:
    arr = values[op.bar]
    (i,) = sim._index(op, group, values, mask, w)
    out = []
    for lane in np.flatnonzero(mask):
        k = int(i[lane])
        if not 0 <= k < len(arr.bars):
            raise sim._error(op, f"mbarrier index {k} is outside the array of {len(arr.bars)}", w, int(lane))
        out.append((int(lane), arr.bars[k]))
    return out


def _mbarrier_init(sim, op, values, mask, w, env):
    for _, bar in _bar_states(sim, op, values, mask, w):
        bar.initialized = True
        bar.count = bar.pending = op.attributes["count"]
        bar.tx = bar.completed = 0
        bar.transactions.clear()


def _complete_phase_if_done(bar: Mbarrier) -> None:
    if bar.pending == 0 and bar.tx == 0:
        bar.completed += 1
        bar.pending = bar.count


def _mbarrier_arrive(sim, op, values, mask, w, env):
    tx = op.attributes.get("expect_tx", 0)
    for lane, bar in _bar_states(sim, op, values, mask, w):
        if not bar.initialized:
            raise sim._error(op, "arrives on an mbarrier that was never initialised", w, lane)
        bar.tx += tx
        bar.pending -= 1  # arrivals past the count roll into the next phase, as on the hardware
        _complete_phase_if_done(bar)


def _phase_done(bar: Mbarrier, parity: int) -> bool:
    return bar.completed % 2 != parity


def _mbarrier_wait(sim, op, values, mask, w, env):
    (parity,) = sim._index(op, "parity", values, mask, w)
    for lane, bar in _bar_states(sim, op, values, mask, w):
        if not bar.initialized:
            raise sim._error(op, "waits on an mbarrier that was never initialised", w, lane)
        p = int(parity[lane]) % 2
        while bar.transactions and not _phase_done(bar, p):
            _land_tma(bar, bar.transactions.pop(0))
        if not _phase_done(bar, p):
            yield ("mbarrier", op, bar, p)


def _tma_load(sim, op, values, mask, w, env):
    tref, dst = values[op.tmap], values[op.dst]
    tm = tref.type
    coords = sim._index(op, "coords", values, mask, w)
    dst_idx = sim._index(op, "dst_index", values, mask, w)
    bars = _bar_states(sim, op, values, mask, w, "bar_index")
    src = tref.buffer.data.reshape(tm.shape)
    k = len(dst_idx)
    for lane, bar in bars:
        if not bar.initialized:
            raise sim._error(op, "completes on an mbarrier that was never initialised", w, lane)
        start = [int(c[lane]) for c in coords]
        # The copy engine fills out-of-bounds elements with zeros.
        box = np.zeros(tm.box, dtype=src.dtype)
        sl_src, sl_box = [], []
        for s, b, size in zip(start, tm.box, tm.shape):
            lo, hi = max(s, 0), min(s + b, size)
            sl_src.append(slice(lo, max(lo, hi)))
            sl_box.append(slice(lo - s, lo - s + max(0, hi - lo)))
        box[tuple(sl_box)] = src[tuple(sl_src)]
        pre = [int(d[lane]) for d in dst_idx]
        for p, size in zip(pre, dst.type.shape[:k]):
            if not 0 <= p < size:
                raise sim._error(op, f"destination index {pre} is outside {dst.type}", w, lane)
        base = sum(p * s for p, s in zip(pre, dst.type.strides[:k]))
        a = _swizzle(base + np.arange(box.size), dst.type.swizzle)  # the copy engine writes swizzled rows
        if dst.pending[a].any():
            raise sim._error(op, "copies into shared memory another async copy is still filling", w, lane)
        dst.pending[a] = True
        bar.transactions.append((dst, a, box.reshape(-1), tm.box_bytes))


def _land_tma(bar: Mbarrier, rec) -> None:
    dst, a, data, nbytes = rec
    dst.data[a] = data
    dst.written[a] = True
    dst.pending[a] = False
    dst.w_thread[a] = _NO_THREAD  # written by the copy engine, ordered by the mbarrier: no thread races with it
    dst.r_epoch[a] = -1
    bar.tx -= nbytes
    _complete_phase_if_done(bar)
