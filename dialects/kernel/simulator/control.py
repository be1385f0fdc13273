"""Structured and blocking ops (generators): loops, branches with the single-writer check, barriers, and the
dependent launch's wait and L2 prefetch."""

from __future__ import annotations

import numpy as np

from .. import ops as K
from .state import _full, _hint


def _for(sim, op, values, mask, w, env):
    lo, hi = (sim._index(op, g, values, mask, w)[0] for g in ("lower", "upper"))
    step = op.attributes["step"]
    iv = lo.copy()
    carries = [values[v] for v in op.inits]
    active = mask & (iv < hi)
    while active.any():
        inner = dict(values)
        inner[op.induction_var] = iv
        for c, x in zip(op.carries, carries):
            inner[c] = x
        yield from sim._exec(op.body.ops, inner, active, w, env)
        y = op.body.ops[-1] if op.body.ops and isinstance(op.body.ops[-1], K.YieldOp) else None
        if y is not None and y.values:
            carries = [_select(active, inner[v], old) for v, old in zip(y.values, carries)]
        iv = iv + step
        active = active & (iv < hi)
    for r, x in zip(op.results, carries):
        values[r] = x


def _select(mask, new, old):
    """`new` where the lanes are active, else `old`: `new` itself when all are (values are never changed in place,
    except a wgmma's accumulator, which its wait fills: a carry must stay that same array)."""
    if mask.all():
        return new
    m = mask.reshape(mask.shape + (1,) * (np.ndim(new) - 1))
    return np.where(m, new, old)


def _if(sim, op, values, mask, w, env):
    if "single_writer" in op.attributes:
        _check_single_writer(sim, op, values, mask, w)
    cond = values[op.cond].astype(bool)
    outs = []
    for region, m in ((op.regions[0], mask & cond), (op.regions[1], mask & ~cond)):
        block = region.block
        if m.any():
            inner = dict(values)
            yield from sim._exec(block.ops, inner, m, w, env)
            y = block.ops[-1] if block.ops and isinstance(block.ops[-1], K.YieldOp) else None
            outs.append([inner[v] for v in y.values] if y is not None else [])
        else:
            outs.append([_full(mask, r.type, 0) for r in op.results])
    for i, r in enumerate(op.results):
        values[r] = _select(cond, outs[0][i], outs[1][i])


def _check_single_writer(sim, op, values, mask, w) -> None:
    """A `single_writer` guard does, in one thread, what every thread of its group (those that differ only along
    the guard's axes) would do: the values its branch uses must agree across the group, or all but one are lost.
    Each thread's n-th arrival is compared with the first arrival of its group's n-th, in any block."""
    axes = op.attributes["single_writer"]
    used = [v for v in _captured(op.regions[0]) if isinstance(values.get(v), np.ndarray)]
    bx, by, _ = sim.bdim
    for lane in np.flatnonzero(mask):
        tid = int(w.lanes[lane])
        coords = dict(zip(K.LAUNCH_AXES, (tid % bx, (tid // bx) % by, tid // (bx * by), *sim.block_idx)))
        me = (op, tuple(coords.values()))
        n = sim.agreement[me] = sim.agreement.get(me, -1) + 1
        key = (op, n, tuple(0 if a in axes else coords[a] for a in K.LAUNCH_AXES))
        mine = [np.asarray(values[v])[lane] for v in used]
        first = sim.agreement.setdefault(key, (mine, tid, tuple(sim.block_idx)))
        for v, a, b in zip(used, first[0], mine):
            if not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
                other = f"{sim._thread_name(first[1])} of block {first[2]}"
                raise sim._error(
                    op,
                    f"stands for a store of every thread along {', '.join(axes)} (the single-writer rule), but they "
                    f"disagree on %{_hint(v)} ({other} has {a}, this thread {b}): one thread's value is stored for "
                    "all and the others' are lost (combine them first)",
                    w,
                    lane,
                )


def _captured(region) -> list:
    """Values a region uses that are defined outside it, in first-use order."""
    ops = [inner for o in region.block.ops for inner in o.walk()]
    inside = {r for o in ops for r in o.results} | set(region.block.args)
    inside |= {a for o in ops for reg in o.regions for b in reg.blocks for a in b.args}
    return list(dict.fromkeys(v for o in ops for v in o.operands if v not in inside))


def _barrier(sim, op, values, mask, w, env):
    if not mask.all():
        raise sim._error(op, "barrier reached by only part of the warp (a barrier in divergent control flow)", w)
    yield ("barrier", op)


def _griddep_wait(sim, op, values, mask, w, env):
    w.griddep_waited = True


def _prefetch_l2(sim, op, values, mask, w, env):
    """Only checked: a prefetch changes no value, but the hardware takes aligned ranges inside the buffer."""
    mem = values[op.mem]
    (start,), (nbytes,) = (sim._index(op, g, values, mask, w) for g in ("index", "bytes"))
    size = mem.dtype.bytes
    for lane in np.flatnonzero(mask):
        b0, n = int(start[lane]) * size, int(nbytes[lane])
        if n <= 0 or n % 16 or b0 % 16:
            why = f"{n} bytes from byte {b0}: the start 16-byte aligned, the size a positive multiple of 16"
            raise sim._error(op, f"prefetches {why}", w, int(lane))
        if b0 < 0 or b0 + n > mem.numel * size:
            why = f"bytes {b0} .. {b0 + n} of {mem.name}, outside its {mem.numel * size}"
            raise sim._error(op, f"prefetches {why}", w, int(lane))
