"""Handlers of the simple ops: thread geometry, constants, casts, register tiles, reductions."""

from __future__ import annotations

import numpy as np

from irforge.scalar_ops import MONOIDS, SCALAR_OPS, compute_dtype, quantize

from .. import ops as K
from ..types import element_type
from .state import _full, _per_thread


def _axis(sim, op, values, mask, w, env):
    d = K.AXES.index(op.attributes["dim"])
    n = len(mask)
    if isinstance(op, K.ThreadIdOp):
        r = env["tid"][d]
    elif isinstance(op, K.BlockIdOp):
        r = np.full(n, sim.block_idx[d])
    elif isinstance(op, K.BlockDimOp):
        r = np.full(n, sim.bdim[d])
    else:
        r = np.full(n, sim.grid[d])
    values[op.result] = np.asarray(r, dtype=np.int64)


def _lane(sim, op, values, mask, w, env):
    values[op.result] = np.asarray(env["lane"] if isinstance(op, K.LaneIdOp) else env["warp"], dtype=np.int64)


def _index_op(sim, op, values, mask, w, env):
    (values[op.result],) = sim._index(op, "expr", values, mask, w)


def _const(sim, op, values, mask, w, env):
    v, t = op.attributes["value"], op.result.type
    if isinstance(v, tuple):  # one value per element
        tile = quantize(np.asarray(v).reshape(_per_thread(t)), element_type(t))
        values[op.result] = np.broadcast_to(tile, (len(mask), *tile.shape)).copy()
        return
    values[op.result] = _full(mask, t, v)


def _cast(sim, op, values, mask, w, env):
    src, dst = element_type(op.input.type), element_type(op.result.type)
    x = values[op.input].astype(compute_dtype(src), copy=False)
    if dst.name == "bool":
        out = x != 0
    elif not dst.is_float and src.is_float:
        with np.errstate(all="ignore"):
            out = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0))
    else:
        out = x
    with np.errstate(all="ignore"):
        values[op.result] = quantize(out, dst)


def _splat(sim, op, values, mask, w, env):
    x = values[op.input]
    shape = _per_thread(op.result.type)
    if x.ndim == 1:  # a scalar per lane
        x = x.reshape(x.shape + (1,) * len(shape))
    values[op.result] = np.broadcast_to(x, (len(mask), *shape)).copy()


def _reshape(sim, op, values, mask, w, env):
    values[op.result] = values[op.input].reshape((len(mask), *_per_thread(op.result.type)))


def _extract(sim, op, values, mask, w, env):
    pos = op.attributes["position"]
    values[op.result] = values[op.tile][(slice(None), *pos)].copy()


def _insert(sim, op, values, mask, w, env):
    pos = op.attributes["position"]
    t = values[op.tile].copy()
    t[(slice(None), *pos)] = values[op.element]
    values[op.result] = t


def _reduce(sim, op, values, mask, w, env):
    m = MONOIDS[op.attributes["kind"]]
    et = element_type(op.input.type)
    x = values[op.input].astype(compute_dtype(et), copy=False)
    axes = tuple(a + 1 for a in op.attributes["axes"])
    with np.errstate(all="ignore"):
        if not op.init:
            values[op.result] = quantize(m.numpy_reduce(x, axis=axes), et)
            return
        kept = [a for a in range(1, x.ndim) if a not in axes]
        folded = np.moveaxis(x, axes, range(x.ndim - len(axes), x.ndim))
        folded = folded.reshape((*[x.shape[a] for a in (0, *kept)], -1))
        acc = values[op.init[0]].astype(compute_dtype(et), copy=False).reshape(folded.shape[:-1])
        for j in range(folded.shape[-1]):  # in order, one element after another
            acc = quantize(SCALAR_OPS[m.op].numpy(acc, folded[..., j]), et)
        values[op.result] = acc.reshape((len(mask), *_per_thread(op.result.type)))


def _smem(sim, op, values, mask, w, env):
    values[op.result] = sim.shared[op.result]


def _noop(sim, op, values, mask, w, env):
    return None
