"""Tensor cores: fragments loaded and stored lane by lane (`ldmatrix`'s rows checked), `mma.sync`, and the
warpgroup MMA (dialects/kernel/warpgroup.py) read through its descriptors, asynchronous until its wait."""

from __future__ import annotations

from functools import cache

import numpy as np

from .. import fragments
from .. import warpgroup as WG
from ..types import FragType
from .accesses import _read, _swizzle, _write
from .state import WARP, GlobalBuffer, Warp


def _lane_points(frag: FragType, w: Warp) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols), each 32 x per_lane: where each lane's fragment elements sit in the tile."""
    return _fragment_points(frag, w.index % 4)


@cache
def _fragment_points(frag: FragType, warp_in_group: int) -> tuple[np.ndarray, np.ndarray]:
    lane = np.arange(WARP)
    pts = frag.points(lane // 4, lane % 4, warp_in_group)
    rows = np.stack([np.broadcast_to(r, lane.shape) for r, _ in pts], axis=1)
    cols = np.stack([np.broadcast_to(c, lane.shape) for _, c in pts], axis=1)
    rows.flags.writeable = cols.flags.writeable = False  # shared by every call for this fragment type
    return rows, cols


def _whole_warp(sim, op, mask, w, what: str) -> None:
    if not mask.all() or len(mask) != WARP:
        raise sim._error(op, f"{what} needs all 32 lanes of the warp", w)


def _frag_addresses(sim, op, mem, frag: FragType, values, mask, w, rows=None, cols=None) -> np.ndarray:
    """Flat addresses (32 x per_lane by default) of each lane's fragment elements, or of the tile points `rows`,
    `cols` (any shape)."""
    _whole_warp(sim, op, mask, w, "a fragment access")
    if rows is None:
        rows, cols = _lane_points(frag, w)
    if op.attributes.get("rows"):  # ghost rows read the last valid one
        rows = np.minimum(rows, op.attributes["rows"] - 1)
    if "transpose" in op.attributes:
        rows, cols = cols, rows
    idx = sim._index(op, "index", values, mask, w)
    lanes = (WARP,) + (1,) * (rows.ndim - 1)
    if isinstance(mem, GlobalBuffer):
        addrs = idx[0].reshape(lanes) + rows * op.attributes["stride"] + cols
        bad = (addrs < 0) | (addrs >= mem.numel)
        if bad.any():
            lane_k = int(np.argmax(bad.reshape(WARP, -1).any(axis=1)))
            raise sim._error(op, f"fragment element outside {mem.name}'s {mem.numel} elements", w, lane_k)
        return addrs
    t_ = mem.type
    full = [np.broadcast_to(i.reshape(lanes), rows.shape) for i in idx]
    rows_dim = op.attributes.get("rows_dim", -2)
    full[rows_dim] = full[rows_dim] + rows
    full[-1] = full[-1] + cols
    for i, size in zip(full, t_.shape):
        if ((i < 0) | (i >= size)).any():
            raise sim._error(op, f"fragment tile reaches outside {t_}", w)
    return _swizzle(sum(i * s for i, s in zip(full, t_.strides)), t_.swizzle)


def _frag_load(sim, op, values, mask, w, env):
    mem = values[op.mem]
    addrs = _frag_addresses(sim, op, mem, op.result.type, values, mask, w)
    values[op.result] = _read(sim, op, mem, addrs, mask, w)


def _ldmatrix(sim, op, values, mask, w, env):
    """A fragment load whose 8 x 8 matrices' rows (8 elements along a memory row) must each be 16 contiguous,
    16-byte aligned bytes."""
    frag = op.result.type
    mem = values[op.mem]
    starts = np.asarray(fragments.operand_matrices(frag.role, frag.shape))  # matrices x 2
    along = np.arange(8)
    # Memory rows run along the tile's rows unless the tile is stored transposed (then along its columns).
    r0, c0 = starts[:, 0][:, None, None], starts[:, 1][:, None, None]
    if "transpose" in op.attributes:
        rows, cols = r0 + along[None, None, :], c0 + along[None, :, None]
    else:
        rows, cols = r0 + along[None, :, None], c0 + along[None, None, :]
    rows = np.broadcast_to(rows, (len(starts), 8, 8))[None]
    cols = np.broadcast_to(cols, (len(starts), 8, 8))[None]
    addrs = _frag_addresses(sim, op, mem, frag, values, mask, w, np.broadcast_to(rows, (WARP, *rows.shape[1:])),
                            np.broadcast_to(cols, (WARP, *cols.shape[1:])))[0]  # fmt: skip
    bad = (addrs[..., 0] % 8 != 0) | (addrs != addrs[..., :1] + along).any(axis=-1)
    if bad.any():
        q, r = np.argwhere(bad)[0]
        raise sim._error(
            op,
            f"row {int(r)} of 8 x 8 matrix {int(q)} is not 16 contiguous bytes aligned to 16 in {mem.type}"
            " (ldmatrix reads each row as one 16-byte piece)",
            w,
        )
    _frag_load(sim, op, values, mask, w, env)


def _frag_store(sim, op, values, mask, w, env):
    mem = values[op.mem]
    addrs = _frag_addresses(sim, op, mem, op.frag.type, values, mask, w)
    _write(sim, op, mem, addrs, values[op.frag], mask, w)


def _tile_of(frag: FragType, vals: np.ndarray, w: Warp) -> np.ndarray:
    """The warp's tile of a fragment (the rows other warps of a warpgroup hold stay zero)."""
    rows, cols = _lane_points(frag, w)
    tile = np.zeros(frag.shape, dtype=np.float32)
    tile[rows, cols] = vals
    return tile


def _mma(sim, op, values, mask, w, env):
    _whole_warp(sim, op, mask, w, "mma")
    a = _tile_of(op.a.type, values[op.a], w)
    b = _tile_of(op.b.type, values[op.b], w)
    c = _tile_of(op.c.type, values[op.c], w)
    d = (a @ b + c).astype(np.float32)
    rows, cols = _lane_points(op.result.type, w)
    values[op.result] = d[rows, cols]


# ---- warpgroup MMA (dialects/kernel/warpgroup.py) ---------------------------------------------------------------
def _wgmma_tile(sim, op, which: str, shape, values, mask, w):
    """The tile operand `which` ("a" or "b") of `shape` as stored ([rows, 16] K-major, [16, N] MN-major) as the
    tensor cores read it: through its descriptor (the layout `WgmmaOp.descriptor` gives the operand, starting at the
    tile's first element), not through the buffer's own indexing, so a descriptor that names the layout wrongly
    reads the wrong elements. Returns (tile, addresses)."""
    mem = values[getattr(op, which)]
    t = mem.type
    d = op.descriptor(which)
    idx = sim._index(op, f"index_{which}", values, mask, w)
    if any((i[mask] != i[mask][0]).any() for i in idx):
        raise sim._error(op, f"the {which.upper()} tile's index differs between the lanes of the warp", w)
    first = [int(i[mask][0]) for i in idx]
    if any(not 0 <= f < n for f, n in zip(first, t.shape)) or first[-2] % 8:
        raise sim._error(op, f"the {which.upper()} tile at {first} does not start a group of 8 rows in {t}", w)
    blocks = which == "b" and op.b_blocks() > 1  # an MN-major B over whole blocks: from the first's start
    if (first[-1] + shape[1]) * t.dtype.bytes > d.span and not (blocks and first[-1] == 0):
        raise sim._error(op, f"the {which.upper()} tile {list(shape)} at {first} leaves its rows' span in {t}", w)
    start = sum(f * st for f, st in zip(first, t.strides)) * t.dtype.bytes
    r, k = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
    addrs = WG.operand_address(d, start, r, k, t.dtype.bytes) // t.dtype.bytes
    if (addrs >= t.numel).any():
        raise sim._error(op, f"the {which.upper()} tile {list(shape)} at {first} reaches outside {t}", w)
    flat = addrs.reshape(WARP, -1)
    data = _read(sim, op, mem, flat, np.ones(WARP, dtype=bool), w)
    return data.reshape(shape).astype(np.float32), (mem, flat, data)


def _wgmma(sim, op, values, mask, w, env):
    """Compute the product now (the operands as they are at issue), but hand back an accumulator of NaNs that the
    wait fills in place: whatever reads it before then (through loop carries too) reads what a GPU would not have
    written yet."""
    _whole_warp(sim, op, mask, w, "wgmma")
    acc = op.result.type
    c = values[op.c]
    if id(c) in w.wgmma_inflight:
        c = w.wgmma_inflight[id(c)][1]
    elif not w.wgmma_fenced:
        raise sim._error(op, "reads an accumulator other instructions wrote, with no kernel.wgmma_fence since", w)
    reads = []
    if op.registers_a:  # written by other instructions: a fence must come between (among the values it saw)
        if w.wgmma_fenced_values.get(id(values[op.a])) is not values[op.a]:
            raise sim._error(op, "reads A's registers with no kernel.wgmma_fence since they were written", w)
        a = _tile_of(op.a.type, values[op.a], w)
    else:
        a, read_a = _wgmma_tile(sim, op, "a", (64, 16), values, mask, w)
        reads.append(read_a)
    b, read_b = _wgmma_tile(sim, op, "b", op.b_tile(), values, mask, w)
    reads.append(read_b)
    d = (a @ (b if "transpose" in op.attributes else b.T) + _tile_of(acc, c, w)).astype(np.float32)
    rows, cols = _lane_points(acc, w)
    pending = np.full((WARP, acc.per_lane), np.nan, dtype=np.float32)
    w.wgmma_inflight[id(pending)] = (pending, d[rows, cols])
    values[op.result] = pending
    w.wgmma_open.append((op, pending, reads))


def _setmaxnreg(sim, op, values, mask, w, env):
    _whole_warp(sim, op, mask, w, "setmaxnreg")
    w.registers.append((op.attributes["action"], op.attributes["count"]))


def _wgmma_fence(sim, op, values, mask, w, env):
    w.wgmma_fenced = True
    if sim.fences_see_registers:
        w.wgmma_fenced_values = {id(v): v for v in values.values()}  # kept alive, so an id names one value


def _wgmma_commit(sim, op, values, mask, w, env):
    w.wgmma_groups.append(w.wgmma_open)
    w.wgmma_open = []


def _wgmma_wait(sim, op, values, mask, w, env):
    """Complete the oldest groups: their accumulators become readable, and the shared memory they read must hold
    what it held at their issue (the tensor cores read it at some point in between)."""
    while len(w.wgmma_groups) > op.attributes["pending"]:
        for issued, pending, reads in w.wgmma_groups.pop(0):
            for mem, addrs, data in reads:
                if (mem.data[addrs] != data).any():
                    raise sim._error(issued, "shared memory it reads was written before its kernel.wgmma_wait", w)
            pending[...] = w.wgmma_inflight.pop(id(pending))[1]
    w.wgmma_fenced = False
