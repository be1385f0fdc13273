"""One block of a launch: each warp a generator over the kernel's ops, scheduled until they block; the dispatch
of ops to their handlers (`_SIMPLE`, and `_BLOCKING` for the generators)."""

from __future__ import annotations

import operator
from functools import cached_property

import numpy as np

from irforge import index_expr as ix
from irforge.ir import Operation
from irforge.scalar_ops import SCALAR_OPS, compute_dtype, quantize
from irforge.target import target

from .. import cluster as CL
from .. import dependent_launch as DL
from .. import ops as K
from .. import warpgroup as WG
from ..types import SmemType, element_type
from .accesses import _atomic, _check_shared_write_order, _load, _store
from .async_copies import (
    _cp_async,
    _cp_async_commit,
    _cp_async_wait,
    _land_tma,
    _mbarrier_arrive,
    _mbarrier_init,
    _mbarrier_wait,
    _phase_done,
    _tma_load,
)
from .cluster import _cluster_barrier, _cluster_map, _store_async
from .control import _barrier, _for, _griddep_wait, _if, _prefetch_l2
from .simple import _axis, _cast, _const, _extract, _index_op, _insert, _lane, _noop, _reduce, _reshape, _smem, _splat
from .state import WARP, MbarrierArray, SharedBuffer, Warp, _per_thread
from .tensor_cores import (
    _frag_load,
    _frag_store,
    _ldmatrix,
    _mma,
    _setmaxnreg,
    _wgmma,
    _wgmma_commit,
    _wgmma_fence,
    _wgmma_wait,
)


class BlockSim:
    def __init__(self, kernel: K.KernelFuncOp, block_idx, args, launch_id: int, agreement: dict, layouts: dict):
        self.kernel = kernel
        self.agreement = agreement
        self.layouts = layouts
        self.block_idx = block_idx
        self.grid = kernel.attributes["grid"]
        self.bdim = kernel.attributes["block"]
        self.launch_id = launch_id
        self.nthreads = self.bdim[0] * self.bdim[1] * self.bdim[2]
        self.block_linear = block_idx[0] + self.grid[0] * (block_idx[1] + self.grid[1] * block_idx[2])
        self.epoch = 0
        self.cluster = None  # a ClusterState, when the kernel is launched in clusters (cluster.py)
        # a programmatic dependent launch: may run while the launch before it does, until each thread's wait
        self.dependent = any(isinstance(op, DL.GridDepWaitOp) for op in kernel.body.ops)
        self.args = dict(zip(kernel.body.args, args))
        self.shared: dict = {}
        for op in kernel.body.ops:
            if isinstance(op, K.SmemOp):
                t = op.result.type
                self.shared[op.result] = SharedBuffer(t) if isinstance(t, SmemType) else MbarrierArray(t)
        self.warps = [
            Warp(w, np.arange(w * WARP, min((w + 1) * WARP, self.nthreads)))
            for w in range((self.nthreads + WARP - 1) // WARP)
        ]

    @cached_property
    def fences_see_registers(self) -> bool:
        """Whether a wgmma of the kernel reads A from registers: only then must a fence remember the values it saw."""
        return any(isinstance(op, WG.WgmmaOp) and op.registers_a for op in self.kernel.walk())

    # ---- scheduling -----------------------------------------------------------------------------------------
    def run(self) -> None:
        self.start()
        while self.live:
            if not self.step():
                self.stuck()
        self.finish()

    def start(self) -> None:
        self.gens = {w.index: self._warp_program(w) for w in self.warps}
        self.live = list(self.warps)

    def finish(self) -> None:
        self._check_unwritten_reads()
        self._check_registers()

    def _check_registers(self) -> None:
        """The warps of a warpgroup run the same kernel.setmaxnreg ops, and the counts the warpgroups end with fit
        the register file (a setmaxnreg.inc waits for registers until some warpgroup gives them back)."""
        groups = [self.warps[i : i + 4] for i in range(0, len(self.warps), 4)]
        start = WG.launch_registers(self.nthreads)
        total = 0
        for g, warps in enumerate(groups):
            seen = {tuple(w.registers) for w in warps}
            if len(seen) > 1:
                raise self._error(self.kernel, f"the warps of warpgroup {g} set different register counts: {seen}")
            steps = seen.pop()
            total += (steps[-1][1] if steps else start) * WG.WARPGROUP
        if any(w.registers for w in self.warps) and total > target().registers_per_sm:
            raise self._error(
                self.kernel,
                f"its warpgroups end with {total} registers, more than a multiprocessor's"
                f" {target().registers_per_sm}: a kernel.setmaxnreg inc would wait forever",
            )

    def step(self) -> bool:
        """Run every warp that can until it blocks, and release a barrier all live warps wait at; whether anything
        moved (the warps of a cluster's barrier wait for the cluster: `cluster.run`)."""
        live, progressed = self.live, False
        for w in live:
            if w.waiting is not None and w.waiting[0] == "mbarrier":
                _, _, bar, parity = w.waiting
                if not _phase_done(bar, parity):
                    continue
                w.waiting = None
            if w.waiting is not None:
                continue
            try:
                w.waiting = next(self.gens[w.index])
            except StopIteration:
                w.done = True
            progressed = True
        live = self.live = [w for w in live if not w.done]
        at_barrier = [w for w in live if w.waiting is not None and w.waiting[0] == "barrier"]
        if live and len(at_barrier) == len(live):
            if len(live) != len(self.warps):
                ended = next(w for w in self.warps if w.done)
                raise self._error(
                    at_barrier[0].waiting[1],
                    f"warp {at_barrier[0].index} waits at this barrier, but warp {ended.index} has finished"
                    " (every thread of the block must reach each barrier)",
                    at_barrier[0],
                )
            sites = {id(w.waiting[1]) for w in at_barrier}
            if len(sites) > 1:
                a, b = at_barrier[0], next(w for w in at_barrier if w.waiting[1] is not at_barrier[0].waiting[1])
                raise self._error(
                    b.waiting[1],
                    f"warp {b.index} waits at this barrier while warp {a.index} waits at another"
                    " (a barrier in divergent control flow)",
                    b,
                )
            self._check_unwritten_reads()
            for w in at_barrier:
                w.waiting = None
            self.epoch += 1
            progressed = True
        if not progressed and live and self._land_transactions():
            progressed = True
        return progressed

    def stuck(self) -> None:
        """Nothing moved: a deadlock (raised), unless every live warp waits at a cluster barrier."""
        live = self.live
        at_barrier = [w for w in live if w.waiting[0] == "barrier"]
        if at_barrier:
            blocked = next(w for w in live if w.waiting[0] != "barrier")
            w0 = at_barrier[0]
            raise self._error(w0.waiting[1], f"deadlock: warp {blocked.index} never reaches this barrier", w0)
        w = next((w for w in live if w.waiting[0] == "mbarrier"), None)
        if w is not None:
            raise self._error(w.waiting[1], "deadlock: the mbarrier phase this warp waits for never completes", w)

    def _check_unwritten_reads(self) -> None:
        """At a barrier (or the kernel's end): reads of shared memory nothing wrote in their epoch are errors."""
        for obj in self.shared.values():
            if isinstance(obj, SharedBuffer) and obj.unwritten_reads:
                addr, (op, tid) = next(iter(obj.unwritten_reads.items()))
                raise op.error(
                    f"reads shared address {addr}, which nothing has written"
                    f" [block {tuple(self.block_idx)}, {self._thread_name(tid)}]"
                )

    def _land_transactions(self) -> bool:
        """Complete every in-flight TMA copy (they may land at any time); True if there were any."""
        landed = False
        for obj in self.shared.values():
            if isinstance(obj, MbarrierArray):
                for bar in obj.bars:
                    while bar.transactions:
                        _land_tma(bar, bar.transactions.pop(0))
                        landed = True
        return landed

    def _warp_program(self, w: Warp):
        lin = w.lanes
        bx, by, _ = self.bdim
        env = {
            "tid": (lin % bx, (lin // bx) % by, lin // (bx * by)),
            "lane": lin % WARP,
            "warp": lin // WARP,
        }
        values = dict(self.args)
        yield from self._exec(self.kernel.body.ops, values, w.full, w, env)
        if w.open_group or w.groups:
            w.groups.append(w.open_group)
            # Copies never waited for still land (the kernel's exit waits for them), unobserved.
            for g in w.groups:
                for rec in g:
                    self._land_cp_async(rec, w)

    # ---- errors ---------------------------------------------------------------------------------------------
    def _error(self, op: Operation, msg: str, w: Warp | None = None, lane: int | None = None):
        where = f"block {tuple(self.block_idx)}"
        if w is not None and lane is not None:
            where += ", " + self._thread_name(int(w.lanes[lane]))
        elif w is not None:
            where += f", warp {w.index}"
        return op.error(f"{msg} [{where}]")

    def _land_cp_async(self, rec, w: Warp) -> None:
        """A cp.async copy lands: it counts as its thread's write, so other threads need a barrier to read it."""
        op, dst, a, tids, data = rec
        _check_shared_write_order(self, op, dst, a, tids)
        dst.pending[a] = False
        dst.data[a] = data
        dst.written[a] = True
        dst.w_thread[a] = tids
        dst.w_epoch[a] = self.epoch

    def _thread_name(self, tid: int) -> str:
        bx, by, _ = self.bdim
        return f"thread ({tid % bx}, {(tid // bx) % by}, {tid // (bx * by)})"

    # ---- execution ------------------------------------------------------------------------------------------
    def _exec(self, ops, values, mask, w, env):
        for op in ops:
            h = _BLOCKING.get(type(op))
            if h is not None:
                yield from h(self, op, values, mask, w, env)
                continue
            h = _SIMPLE.get(type(op))
            if h is None:
                if isinstance(op, K.ScalarMathOp):
                    self._scalar(op, values, mask)
                    continue
                if isinstance(op, K.ShuffleOp):
                    self._shuffle(op, values, mask, w)
                    continue
                raise self._error(op, "is not supported by the kernel simulator", w)
            h(self, op, values, mask, w, env)

    def _index(self, op, group, values, mask, w) -> list[np.ndarray]:
        exprs = self.layouts.get((op, group))
        if exprs is None:
            exprs = self.layouts[op, group] = [_lanes_expr(e) for e in op.exprs(group)]
        dims = [values[v] for v in op.index_operands]

        def fail(e, a, b, bad):
            lane = int(np.argmax(bad))
            at = [int(np.broadcast_to(x, mask.shape)[lane]) for x in (a, b)]
            raise self._error(
                op,
                f"index expression '{e.format()}' divides {at[0]} by {at[1]}; index division"
                " needs a non-negative dividend and a positive divisor (CUDA truncates, the IR floors)",
                w,
                lane,
            )

        out = []
        for f in exprs:
            x = np.asarray(f(dims, mask, fail), np.int64)
            out.append(x if x.shape == mask.shape else np.broadcast_to(x, mask.shape))
        return out

    # ---- values ---------------------------------------------------------------------------------------------
    def _scalar(self, op, values, mask):
        rt = op.result.type
        rank = len(_per_thread(rt)) + 1
        args = []
        for v in op.operands:
            a = values[v]
            a = a.reshape(a.shape + (1,) * (rank - a.ndim))  # a scalar broadcasts over a tile's elements
            args.append(a.astype(compute_dtype(element_type(v.type)), copy=False))
        with np.errstate(all="ignore"):
            out = SCALAR_OPS[op.scalar_op].numpy(*args)
        values[op.result] = quantize(np.broadcast_to(out, (len(mask), *_per_thread(rt))), element_type(rt))

    def _shuffle(self, op, values, mask, w):
        if not mask.all() or len(mask) != WARP:
            lane = int(np.argmin(mask)) if not mask.all() else None
            raise self._error(
                op,
                "a shuffle needs all 32 lanes of the warp (it uses the full mask); some are inactive or absent",
                w,
                lane,
            )
        x = values[op.value]
        (arg,) = self._index(op, "lane", values, mask, w)
        width = op.attributes.get("width", WARP)
        lane = np.arange(WARP)
        seg = lane // width
        if op.mode == "xor":
            src = lane ^ arg
            src = np.where(src // width > seg, lane, src)
        elif op.mode == "down":
            src = np.where(lane % width + arg >= width, lane, lane + arg)
        elif op.mode == "up":
            src = np.where(lane % width - arg < 0, lane, lane - arg)
        else:
            src = seg * width + arg % width
        src = np.clip(src, 0, WARP - 1)
        values[op.result] = x[src]


_BINARY = {
    ix.Add: operator.add,
    ix.Sub: operator.sub,
    ix.Mul: operator.mul,
    ix.FloorDiv: operator.floordiv,
    ix.CeilDiv: lambda a, b: -(-a // b),
    ix.Mod: operator.mod,
    ix.Min: np.minimum,
    ix.Max: np.maximum,
}


def _lanes_expr(e):
    """`e` as a function of (the index operands' values, the lane mask, a callback raising for a division by a
    non-positive number or of a negative one on an active lane) giving a Python int where it does not vary, else
    int64 values; made once per op, as the simulator evaluates an op's indices on every trip."""
    if isinstance(e, ix.Const):
        v = e.value
        return lambda dims, mask, fail: v
    if isinstance(e, ix.Dim):
        i = e.index
        return lambda dims, mask, fail: np.asarray(dims[i], dtype=np.int64)
    lhs, rhs, fn = _lanes_expr(e.lhs), _lanes_expr(e.rhs), _BINARY[type(e)]
    if not isinstance(e, (ix.FloorDiv, ix.CeilDiv, ix.Mod)):
        return lambda dims, mask, fail: fn(lhs(dims, mask, fail), rhs(dims, mask, fail))
    if isinstance(e.rhs, ix.Const) and e.rhs.value > 0:
        d = e.rhs.value

        def by_constant(dims, mask, fail):
            a = lhs(dims, mask, fail)
            bad = mask & (a < 0)
            if bad.any():
                fail(e, a, d, bad)
            return fn(a, d)

        return by_constant

    def divide(dims, mask, fail):
        a, b = lhs(dims, mask, fail), rhs(dims, mask, fail)
        bad = mask & ((a < 0) | (b <= 0))
        if bad.any():
            fail(e, a, b, bad)
        return fn(a, np.where(b <= 0, 1, b))  # lanes the mask leaves out

    return divide


# ---- dispatch --------------------------------------------------------------------------------------------------
_SIMPLE = {
    K.ThreadIdOp: _axis,
    K.BlockIdOp: _axis,
    K.BlockDimOp: _axis,
    K.GridDimOp: _axis,
    K.LaneIdOp: _lane,
    K.WarpIdOp: _lane,
    K.IndexOp: _index_op,
    K.ConstOp: _const,
    K.CastOp: _cast,
    K.SplatOp: _splat,
    K.ReshapeOp: _reshape,
    K.ExtractOp: _extract,
    K.InsertOp: _insert,
    K.ReduceOp: _reduce,
    K.YieldOp: _noop,
    K.SmemOp: _smem,
    K.LoadOp: _load,
    K.StoreOp: _store,
    K.AtomicOp: _atomic,
    K.FenceProxyAsyncOp: _noop,
    DL.GridDepWaitOp: _griddep_wait,
    DL.GridDepLaunchDependentsOp: _noop,
    DL.PrefetchL2Op: _prefetch_l2,
    CL.ClusterMapOp: _cluster_map,
    CL.StoreAsyncOp: _store_async,
    K.FragLoadOp: _frag_load,
    K.FragStoreOp: _frag_store,
    K.LdmatrixOp: _ldmatrix,
    K.MmaOp: _mma,
    WG.WgmmaOp: _wgmma,
    WG.WgmmaFenceOp: _wgmma_fence,
    WG.WgmmaCommitOp: _wgmma_commit,
    WG.WgmmaWaitOp: _wgmma_wait,
    WG.SetMaxRegistersOp: _setmaxnreg,
    K.CpAsyncOp: _cp_async,
    K.CpAsyncCommitOp: _cp_async_commit,
    K.CpAsyncWaitOp: _cp_async_wait,
    K.MbarrierInitOp: _mbarrier_init,
    K.MbarrierArriveOp: _mbarrier_arrive,
    K.TmaLoadOp: _tma_load,
}

_BLOCKING = {
    K.ForOp: _for,
    K.IfOp: _if,
    K.BarrierOp: _barrier,
    K.MbarrierWaitOp: _mbarrier_wait,
    CL.ClusterBarrierOp: _cluster_barrier,
}
