"""A model of shared-memory bank conflicts: the wavefronts a staged box's accesses take, as `lower-to-kernel`
issues them. `tile-pad-smem` and `tile-swizzle-smem` choose a stage's layout with it, and tile-tma's heuristic
whether the copy engine's layouts are good enough.

The hardware rules it counts by (NVIDIA GPUs since Volta, Hopper included):

1. Shared memory is `target().smem_banks` (32) banks of `bank_bytes` (4) bytes: byte address `a` sits in bank
   `(a // 4) % 32`, in word `a // 4`.
2. One instruction of a warp moves `S` bytes per thread (1, 2, 4, 8 or 16, aligned to `S`). It is served in
   phases of at most 128 bytes: all 32 threads at once for `S <= 4`, half warps (16 threads) for 8 bytes, quarter
   warps (8 threads) for 16 bytes.
3. A phase takes as many wavefronts as the most distinct words any one bank must deliver in it: threads that touch
   the same word share it (a broadcast), two words of one bank take two wavefronts. Inactive threads ask nothing.
4. An instruction takes the sum of its phases' wavefronts; conflict-free, one per phase that moves at most 128
   distinct bytes (`ideal`). A conflict-free 16-byte load of a warp is 4 wavefronts, a 4-byte one 1.

Not modelled: the merging of quarter warps some GPUs do when pairs of threads read identical 16-byte addresses
(the count is then an upper bound), and anything but shared memory (the pipe's other users, latencies).

What is counted for a stage, per fill (one trip of the loop it sits in; every warp of the block):

- its reads: every `tile.load` of the copy, as the lowering issues it (`memory.pattern`: the register tile the
  load reaches over the lanes around it, its run dimension and vector width): one instruction per vector piece of
  16 bytes at most, each thread's address from the thread layout of the loops around it (the hardware axes of the
  thread, its unit, the loop's `Layout`: split lane groups and raster order included), times the trips each
  thread makes of the loops between the stage and the load;
- its writes: the block's threads copying the box in (`copy_width()` elements per thread and piece, threads in
  order along the box's rows), none for a copy made by the tensor memory accelerator.

Loops whose index is the same in every thread (the chunk of K a trip reads, the ring slot) are sampled at a few
of their values, evenly spread; every warp of the block is counted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where it computes: the pass registry imports every pass at startup
    import numpy as np

import itertools
import math
from dataclasses import dataclass

from irforge.dialects import tile as T
from irforge.dialects.kernel import fragments as layouts
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel.types import SmemType
from irforge.dialects.loop.indexing import used_values
from irforge.dialects.tile import fragments
from irforge.dialects.tile.vectors import expand, loop_lanes
from irforge.passes.tile_to_kernel import memory

from irforge import index_expr as ix
from irforge.target import target
from irforge.types import TensorType

SAMPLES = 4  # values a uniform loop index is sampled at
MAX_SAMPLES = 64  # combinations of uniform values evaluated per access


def wavefronts(addrs, nbytes: int, active=None) -> tuple[np.ndarray, np.ndarray]:
    """(wavefronts, conflict-free wavefronts) of warp instructions: row `i` of `addrs` holds the byte address
    each of a warp's threads accesses `nbytes` at (rules 2-4 of the module docstring); `active` masks threads."""
    import numpy as np

    t = target()
    warp, banks, word = t.warp_size, t.smem_banks, t.bank_bytes
    a = np.atleast_2d(np.asarray(addrs, dtype=np.int64))
    act = np.ones(a.shape, bool) if active is None else np.broadcast_to(np.asarray(active, bool), a.shape)
    if a.shape[1] < warp:  # a partial warp: the missing threads ask nothing
        a, act = _widen(a, warp), _widen(act, warp)
    n = a.shape[0]
    per_phase = warp if nbytes <= word else warp * word // nbytes
    phases = warp // per_phase
    k = max(1, nbytes // word)
    # What a phase's distinct cells are: aligned vectors of k words fill k consecutive banks (one of banks / k
    # groups), so each bank of a group delivers one word per distinct vector of that group, and counting vectors
    # per group counts words per bank with k times fewer elements. Otherwise, each word in its bank.
    # int32: shared memory is far smaller than 2^31 words, and numpy sorts and divides int32 much faster.
    if k > 1 and banks % k == 0 and not (a % nbytes).any():
        cells, groups = (a // nbytes).astype(np.int32)[..., None], banks // k
    else:
        k, groups = 1, banks
        cells = (a // word).astype(np.int32)[..., None] + np.arange(max(1, nbytes // word), dtype=np.int32)
    m = n * phases
    cells = np.where(act[..., None], cells, -1).reshape(m, -1)
    cells.sort(axis=1)
    distinct = cells >= 0
    distinct[:, 1:] &= cells[:, 1:] != cells[:, :-1]
    bank = cells & (groups - 1) if groups & (groups - 1) == 0 else cells % groups  # a mask is a cheap modulo
    bins = np.where(distinct, bank, groups)
    bins += (groups + 1) * np.arange(m, dtype=np.int32)[:, None]
    counts = np.bincount(bins.ravel(), minlength=(groups + 1) * m).reshape(m, groups + 1)
    wf = counts[:, :groups].max(axis=1).reshape(n, phases).sum(axis=1)
    ideal = (-(-distinct.sum(axis=1) * k // banks)).reshape(n, phases).sum(axis=1)
    return wf, ideal


@dataclass
class Cost:
    """A stage's shared-memory traffic per fill under one layout."""

    wavefronts: float
    ideal: float  # the same instructions without conflicts
    requests: float  # warp instructions
    widths: tuple  # (access, bytes per thread of its instructions): the reads, then the copy

    @property
    def per_request(self) -> float:
        return self.wavefronts / self.requests if self.requests else 0.0

    def __str__(self) -> str:
        if not self.requests:
            return "no shared-memory accesses"
        return (
            f"{self.per_request:.2f} wavefronts per request ({self.ideal / self.requests:.2f} without conflicts), "
            f"{self.wavefronts:g} per fill"
        )


def stage_cost(stage: T.StageOp) -> Cost:
    """The wavefronts of `stage`'s reads and writes per fill in its layout (`trying` sets another for a while)."""
    return Weigher(stage).cost()


class Weigher:
    """The model of one stage under the layouts a pass weighs: what no layout changes (each load's lanes, thread
    layout and samples) is worked out once, each access pattern once per shared-memory type. Valid while only
    the stage's layout (`trying`) changes; a pass makes one per decision."""

    def __init__(self, stage: T.StageOp):
        self.stage = stage
        self.kernel = T.kernel_of(stage)
        self._loads = _loads(stage)
        self._threads: dict = {}  # load -> (lanes, thread layout)
        self._patterns: dict = {}  # (load, smem type) -> (pattern, pieces, chunk)

    def cost(self) -> Cost:
        """The stage's cost in the layout it has now."""
        stage, t = self.stage, memory.slot_type(self.stage)
        parts = [self._reads(ld, t) for ld in self._loads]
        if stage.copy != "tma":
            parts.append(_writes(self.kernel, stage, t, stage.copy_width()))
        return Cost(
            sum(p[0] for p in parts), sum(p[1] for p in parts), sum(p[2] for p in parts), tuple(p[3] for p in parts)
        )

    def _reads(self, load: T.LoadOp, t: SmemType):
        import numpy as np

        if load not in self._threads and (spec := _ldmatrix_factor(load)) is not None:
            return _ldmatrix_reads(self.kernel, self.stage, load, t, spec)
        if load not in self._threads:
            lanes = loop_lanes(load)
            self._threads[load] = lanes, _thread_layout(self.kernel, self.stage, load)
        lanes, (threads, active, samples, trips) = self._threads[load]
        if (load, t) not in self._patterns:
            self._patterns[load, t] = _pieces(load, lanes, t)
        p, pieces, chunk = self._patterns[load, t]
        combos = list(itertools.product(samples, range(self.stage.ring)))
        combos = combos[:: -(-len(combos) // MAX_SAMPLES)]
        # (combination, thread): the element offset of each thread's access, every combination evaluated at once
        env = {}
        for v in used_values(p.offset):
            if v in samples[0]:
                env[v] = np.array([values[v] for values, _ in combos], np.int64)[:, None]
            else:
                env[v] = threads[v][None, :] if v in threads else 0
        slots = np.array([slot for _, slot in combos], np.int64)[:, None] * t.numel
        bases = np.broadcast_to(np.asarray(p.offset.evaluate(env), np.int64) + slots, (len(combos), active.size))
        offsets = np.array([off for off, _ in pieces], np.int64)[None, :, None]
        extras = np.array([extra for _, extra in pieces], np.int64)[None, :, None]
        # (combination, piece, thread): every instruction the load issues
        addrs = _swizzled(bases[:, None, :] + offsets, t.swizzle) * t.dtype.bytes + extras
        wf, best = wavefronts(_warps(addrs), chunk, _warps(np.broadcast_to(active, addrs.shape)))
        requests = len(pieces) * _warp_count(self.kernel) * trips
        return (
            wf.sum() / len(combos) * trips,
            best.sum() / len(combos) * trips,
            requests,
            (_access(load), chunk),
        )


@dataclass(frozen=True)
class _Fragment:
    """How ldmatrix reads a factor's staged tile: its role, the indices of the tile's rows and columns (one of them
    the reduction's), the fragment's shape a step and whether the tile is stored transposed."""

    role: str
    rows: object
    cols: object
    shape: tuple[int, int]
    transpose: bool


def _ldmatrix_factor(load: T.LoadOp) -> _Fragment | None:
    """How ldmatrix reads `load` when it is a factor of a contraction laid out on mma atoms (`tile-tensorize`:
    `lower-to-kernel` loads its fragments with ldmatrix), else None."""
    loop = next((lp for lp in T.enclosing_loops(load) if "atom" in lp.attributes), None)
    if loop is None or not str(loop.attributes["atom"]).startswith("mma."):
        return None
    ops = fragments.any_operands(loop, *loop.ivs)
    if isinstance(ops, str):
        return None
    tile = tuple(e // w for e, w in zip(loop.extents, loop.attributes["warps"]))
    rows, cols = loop.ivs
    if isinstance(ops, fragments.AttentionOperands):
        keys, scores = ops.contraction.reduce, ops.contraction.a_reduction
        sides = [
            (ops.scores[0], "a", rows, scores.iv, (fragments.fragment_rows(tile[0]), 16)),
            (ops.scores[1], "b", scores.iv, keys.iv, (16, keys.extents[0])),
        ]
        sides += [(w, "b", keys.iv, cols, (16, tile[1])) for w in ops.weights if w is not None]
    else:
        k = ops.contraction.reduce.iv
        sides = [
            s for a, b in ops.products for s in ((a, "a", rows, k, (tile[0], 16)), (b, "b", k, cols, (16, tile[1])))
        ]
    for f, role, r, c, shape in sides:
        if load in f.loads:
            k_dim = fragments.k_dim(load, c if role == "a" else r)
            return _Fragment(role, r, c, shape, (k_dim == -2) if role == "a" else (k_dim == -1))
    return None


def _ldmatrix_reads(kernel: T.KernelOp, stage: T.StageOp, load: T.LoadOp, t: SmemType, f: _Fragment):
    """The wavefronts of one warp's ldmatrix reads of a factor's tile (every step along the reduction), times the
    block's warps and the times each reads it per fill: each 8 x 8 matrix is one phase of 8 lanes, each lane the
    address of one 16-byte row (along the tile's rows, or its columns where it is stored transposed)."""
    import numpy as np

    offset = sum((e * s for e, s in zip((expand(e) for e in load.index_exprs()), t.strides)), start=ix.Const(0))
    k_iv = f.cols if f.role == "a" else f.rows
    k_extent = k_iv.block.parent_op.extents[k_iv.index]
    starts = np.asarray(layouts.operand_matrices(f.role, f.shape))
    along = np.arange(8)
    r0, c0 = starts[:, 0][:, None], starts[:, 1][:, None]
    rows, cols = (
        (np.broadcast_to(r0, (len(starts), 8)), c0 + along)
        if f.transpose
        else (r0 + along, np.broadcast_to(c0, (len(starts), 8)))
    )
    addrs = []
    for step in range(0, k_extent, 16):
        env = dict.fromkeys(used_values(offset), 0)
        if f.role == "a":
            env |= {f.rows: rows, f.cols: cols + step}
        else:
            env |= {f.rows: rows + step, f.cols: cols}
        addrs.append(_swizzled(np.broadcast_to(np.asarray(offset.evaluate(env), np.int64), rows.shape), t.swizzle))
    lanes = np.concatenate(addrs).reshape(-1, 8) * t.dtype.bytes
    lanes = np.concatenate([lanes, np.zeros((-len(lanes) % 4, 8), np.int64)]).reshape(-1, 32)  # x4: 4 matrices
    active = np.ones(lanes.shape, bool)
    active.reshape(-1, 8)[len(starts) * len(addrs) :] = False
    wf, best = wavefronts(lanes, 16, active)
    owner, fixed = stage.parent_op, {f.rows, f.cols}
    trips = math.prod(
        lp.work_items
        for lp in T.enclosing_loops(load)
        if lp is not owner and owner.is_ancestor_of(lp) and "atom" not in lp.attributes and not set(lp.ivs) & fixed
    )
    times = _warp_count(kernel) * trips
    return wf.sum() * times, best.sum() * times, len(lanes) * times, (_access(load), 16)


def _pieces(load: T.LoadOp, lanes, t: SmemType):
    """(the load's access pattern in `t`, its instructions' (element offset, byte offset) pieces, their bytes)."""
    nbytes = t.dtype.bytes
    p = memory.pattern(load, lanes, t)
    if any(n > 1 for n in p.shape):
        run, runs = K.access_runs(TensorType(t.dtype, p.shape), p.strides, p.width)
    else:
        run, runs = 1, [(0, [0])]
    chunk = min(16, run * nbytes)
    return p, [(off, c * chunk) for off, _ in runs for c in range(run * nbytes // chunk)], chunk


def _loads(stage: T.StageOp) -> list[T.LoadOp]:
    return [u for u, _ in stage.result.uses if isinstance(u, T.LoadOp)]


def _swizzled(offsets: np.ndarray, sw: tuple) -> np.ndarray:
    if not sw:
        return offsets
    b, m, s = sw
    return offsets ^ (((offsets >> (m + s)) & ((1 << b) - 1)) << m)


def _writes(kernel: T.KernelOp, stage: T.StageOp, t: SmemType, vec: int):
    """The block's threads copying the box in, as `memory.copy` does: thread `i` takes elements `i * vec + j *
    threads * vec`, `vec` at a time."""
    import numpy as np

    nthreads, box = kernel.threads, stage.box
    numel = math.prod(box)
    trips = -(-numel // (nthreads * vec))
    e = np.arange(trips)[:, None] * nthreads * vec + np.arange(nthreads)[None, :] * vec
    active = e < numel
    local = np.zeros_like(e)
    for d, n in enumerate(box):
        local = local + (e // math.prod(box[d + 1 :])) % n * t.strides[d]
    slots = np.arange(stage.ring)[:, None, None] * t.numel
    addrs = _swizzled(local + slots, t.swizzle) * t.dtype.bytes  # (slot, trip, thread)
    wf, best = wavefronts(_warps(addrs), vec * t.dtype.bytes, _warps(np.broadcast_to(active, addrs.shape)))
    return (
        wf.sum() / stage.ring,
        best.sum() / stage.ring,
        trips * _warp_count(kernel),
        ("the copy", vec * t.dtype.bytes),
    )


def _warp_count(kernel: T.KernelOp) -> int:
    return -(-kernel.threads // target().warp_size)


def _warps(a: np.ndarray) -> np.ndarray:
    """(..., threads) -> (instructions, 32): each warp of the block, its missing threads inactive (zeros)."""
    warp = target().warp_size
    return _widen(a, -(-a.shape[-1] // warp) * warp).reshape(-1, warp)


def _widen(a: np.ndarray, n: int) -> np.ndarray:
    """`a` with its last axis zero-filled to `n` entries (np.pad's result, without its overhead: this is hot)."""
    import numpy as np

    if a.shape[-1] == n:
        return a
    out = np.zeros((*a.shape[:-1], n), a.dtype)
    out[..., : a.shape[-1]] = a
    return out


def _thread_layout(kernel: T.KernelOp, stage: T.StageOp, load: T.LoadOp):
    """({index: per-thread values}, active threads, [{index: value} samples of the uniform indices], trips): the
    loop indices of lane 0 of each thread's first work item in the loops around `load` distributed over threads;
    samples of the others (over the work items of the loops between the stage and the load, the first of the
    rest); and how many times each thread reaches the load per fill."""
    import numpy as np

    owner = stage.parent_op
    n = kernel.threads
    lin = np.arange(n)
    bx, by, _ = kernel.attributes["block"]
    hw = {"threadIdx.x": lin % bx, "threadIdx.y": (lin // bx) % by, "threadIdx.z": lin // (bx * by)}
    threads: dict = {}
    active = np.ones(n, bool)
    choices: list[list[dict]] = []
    trips = 1
    for lp in T.enclosing_loops(load):
        inside = lp is not owner and owner.is_ancestor_of(lp)
        layout = lp.layout
        if any(a in T.THREAD_AXES for a in lp.bind):
            u = np.zeros(n, np.int64)
            for a in lp.bind:
                u = u * kernel.axis_size(a) + (hw[a] if a in hw else 0)
            active &= u < lp.work_items
            coords = layout.work_coords(np.minimum(u, lp.work_items - 1))
            for d, iv in enumerate(lp.ivs):
                threads[iv] = layout.index(d, coords[d], 0)
            if inside:
                trips *= -(-lp.work_items // lp.units(kernel))
            continue
        items = [0]
        if inside:
            w = lp.work_items
            items = sorted({w * i // SAMPLES for i in range(min(SAMPLES, w))})
            trips *= -(-w // lp.units(kernel)) if lp.bind else w
        options = []
        for w in items:
            coords = layout.work_coords(w)
            options.append({iv: layout.index(d, coords[d], 0) for d, iv in enumerate(lp.ivs)})
        choices.append(options)
    samples = [dict(kv for part in combo for kv in part.items()) for combo in itertools.product(*choices)]
    if len(samples) > MAX_SAMPLES:
        samples = samples[:: -(-len(samples) // MAX_SAMPLES)]
    return threads, active, samples, trips


def _access(load: T.LoadOp) -> str:
    """A load as a refusal names it: its value, or the stage it reads where the value has no name."""
    return f"%{load.result.name_hint}" if load.result.name_hint else f"a load of %{load.operands[0].name_hint}"
