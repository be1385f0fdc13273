"""The kernel dialect's reference interpreter: a SIMT simulator on numpy, for tiny shapes.

It runs the host function (allocations, views, launches in order) and every launch block by block. Inside a block,
each warp is a Python generator that executes the kernel's ops in lockstep over its lanes (numpy arrays with one
row per lane), with a mask for divergent `kernel.if`s and loops; warps are scheduled until they block (at a
`kernel.barrier` or an `mbarrier_wait`), so producer/consumer kernels run as on the GPU. Barriers, shared memory,
shuffles, vector accesses, cp.async groups, mbarrier phases with transaction bytes, TMA boxes and mma fragments
all follow the hardware's rules, and what the simulator can see going wrong is an error located at the op:

- two threads writing one shared (or global) address with no barrier between them, a thread reading or
  overwriting what another touched since the last barrier, a read of shared memory nothing wrote, a read of an
  async copy's destination before its wait;
- a single-writer guard (`kernel.if {single_writer = [...]}`) whose threads disagree on what it stores;
- a barrier or a shuffle reached by part of a warp, warps waiting at different barriers, a deadlock;
- out-of-bounds or misaligned vector accesses, reads of never-written global memory, outputs left unwritten.

It follows `irforge.interpreter`'s convention: `run(module, inputs, params, entry=, seed=) -> outputs`, numpy arrays
in the order of the host function's results (bf16 values held in float32 arrays, as `irforge.scalar_ops` does).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from functools import cache, cached_property

import numpy as np

from irforge import index_expr as ix
from irforge.diagnostics import error
from irforge.ir import Operation
from irforge.scalar_ops import MONOIDS, SCALAR_OPS, compute_dtype, numpy_dtype, quantize
from irforge.target import target
from irforge.types import ScalarType, TensorType

from . import dependent_launch as DL
from . import fragments
from . import ops as K
from . import warpgroup as WG
from .types import FragType, MbarrierType, SmemType, TensorMapType, element_type

WARP = target().warp_size
_NO_THREAD = -1
_MANY = -2  # several threads read an address since the last barrier


# ---- memory ----------------------------------------------------------------------------------------------------
class GlobalBuffer:
    """A device buffer: flat storage plus what the race checks need (who wrote each element, in which launch)."""

    def __init__(self, dtype: ScalarType, numel: int, data: np.ndarray | None = None, name: str = "buffer"):
        self.dtype = dtype
        self.name = name
        if data is None:
            fill = np.nan if dtype.is_float else 0
            self.data = np.full(numel, fill, dtype=numpy_dtype(dtype))
            self.written = np.zeros(numel, dtype=bool)
        else:
            self.data = quantize(np.ascontiguousarray(data).reshape(-1), dtype).copy()
            self.written = np.ones(numel, dtype=bool)
        self.w_launch = np.full(numel, -1, dtype=np.int64)
        self.w_thread = np.full(numel, _NO_THREAD, dtype=np.int64)
        self.w_epoch = np.full(numel, -1, dtype=np.int64)

    @property
    def numel(self) -> int:
        return self.data.size


class SharedBuffer:
    """A shared-memory buffer of one block, with per-element race-tracking state for the current barrier epoch."""

    def __init__(self, t: SmemType):
        self.type = t
        n = t.numel
        self.data = np.zeros(n, dtype=numpy_dtype(t.dtype))
        self.written = np.zeros(n, dtype=bool)
        self.pending = np.zeros(n, dtype=bool)  # an async copy (cp.async, TMA) is on its way here
        self.w_thread = np.full(n, _NO_THREAD, dtype=np.int64)
        self.w_epoch = np.full(n, -1, dtype=np.int64)
        self.r_thread = np.full(n, _NO_THREAD, dtype=np.int64)
        self.r_epoch = np.full(n, -1, dtype=np.int64)
        # Reads of never-written addresses in the current epoch: {address: (op, thread)}. A write by another thread
        # later in the epoch makes one a race (the barrier between them is missing); at the barrier, the rest are
        # reads of memory nothing wrote.
        self.unwritten_reads: dict[int, tuple] = {}


@dataclass
class Mbarrier:
    initialized: bool = False
    count: int = 0
    pending: int = 0  # arrivals still missing in the current phase
    tx: int = 0  # transaction bytes still missing in the current phase
    completed: int = 0  # phases completed so far
    transactions: list = field(default_factory=list)  # in-flight TMA copies that complete on this barrier


class MbarrierArray:
    def __init__(self, t: MbarrierType):
        self.bars = [Mbarrier() for _ in range(t.count)]


@dataclass
class TensorMapRef:
    buffer: GlobalBuffer
    type: TensorMapType


class SimulationError(Exception):
    """Carries a located IRForgeError out of a warp generator."""


# ---- the program -----------------------------------------------------------------------------------------------
def run(module: Operation, inputs=None, params=None, *, entry: str = "forward", seed: int = 0) -> list[np.ndarray]:
    """Run the host function of a kernel-level module (the `irforge.interpreter` convention: inputs as a list or a
    dict by name, missing ones random; params by name, missing ones random from their name and the seed)."""
    from irforge.builtin import ReturnOp
    from irforge.interpreter import bind_inputs, entry_function, param_value

    host = entry_function(module, entry)
    env: dict = {}
    for i, (a, x) in enumerate(zip(host.body.args, bind_inputs(host, inputs, seed))):
        env[a] = GlobalBuffer(a.type.dtype, a.type.numel, x, name=f"input #{i} (%{a.name_hint or i})")
    ret = host.body.ops[-1]
    state = {ret.operands[pos]: (name, arg) for name, arg, pos in host.state_pairs()}
    launches = 0
    for op in host.body.ops:
        if isinstance(op, K.ParamOp):
            t, sym = op.result.type, op.attributes["sym"].name
            env[op.result] = GlobalBuffer(t.dtype, t.numel, param_value(sym, t, params, seed), name=f"param @{sym}")
        elif isinstance(op, K.AllocOp) and op.result in state:  # a state's buffer holds the state on entry
            name, arg = state[op.result]
            env[op.result] = GlobalBuffer(arg.type.dtype, arg.type.numel, env[arg].data, name=f"state '{name}'")
        elif isinstance(op, K.AllocOp):
            env[op.result] = GlobalBuffer(op.result.type.dtype, op.result.type.numel, name="%" + _hint(op.result))
        elif isinstance(op, K.ViewOp):
            env[op.result] = env[op.source]
        elif isinstance(op, K.LaunchOp):
            launches += 1
            _launch(op, [env[v] for v in op.args], launches)
        elif isinstance(op, ReturnOp):
            outs = []
            for v in op.values:
                buf = env[v]
                if not buf.written.all():
                    missing = int((~buf.written).sum())
                    raise error(f"result {buf.name} has {missing} element(s) no kernel wrote", op.loc)
                outs.append(buf.data.reshape(v.type.shape).copy())
            return outs
        else:
            raise op.error("is not a host op the kernel simulator knows")
    raise error("the host function has no func.return", host.loc)


def _hint(v) -> str:
    return v.name_hint or "buffer"


def _launch(op: K.LaunchOp, buffers: list[GlobalBuffer], launch_id: int) -> None:
    kernel = op.callee_op()
    params = kernel.attributes["function_type"].inputs
    bound = []
    for buf, t in zip(buffers, params):
        bound.append(TensorMapRef(buf, t) if isinstance(t, TensorMapType) else buf)
    gx, gy, gz = kernel.attributes["grid"]
    agreement: dict = {}  # what the single-writer guards saw, across the launch's blocks
    # the same in every block: (access, type) -> _access_layout, (op, index group) -> its indices as functions
    layouts: dict = {}
    with np.errstate(all="ignore"):  # index arithmetic wraps like the GPU's; bounds are checked, not warned about
        for bz in range(gz):
            for by in range(gy):
                for bx in range(gx):
                    BlockSim(kernel, (bx, by, bz), bound, launch_id, agreement, layouts).run()


# ---- one block -------------------------------------------------------------------------------------------------
class Warp:
    def __init__(self, index: int, lanes: np.ndarray):
        self.index = index
        self.lanes = lanes  # linear thread ids in the block
        self.full = np.ones(len(lanes), dtype=bool)
        self.waiting = None  # None, ("barrier", op) or ("mbarrier", op, bar_state, parity)
        self.done = False
        self.griddep_waited = False  # past its kernel.griddepcontrol_wait
        self.open_group: list = []  # cp.async copies not yet committed
        self.groups: list = []  # committed cp.async groups, oldest first
        # wgmma: accumulators in flight {result value: its lanes' values once ready}, the wgmmas issued since the
        # last commit and the committed groups (each wgmma with the shared memory it read), whether a wgmma_fence
        # came since the last wait
        self.wgmma_inflight: dict = {}
        self.wgmma_open: list = []
        self.wgmma_groups: list = []
        self.wgmma_fenced = False
        self.wgmma_fenced_values: dict = {}  # the values that existed at the last wgmma_fence
        self.registers: list = []  # the (action, count) of each kernel.setmaxnreg it ran


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
        gens = {w.index: self._warp_program(w) for w in self.warps}
        live = list(self.warps)
        self._schedule(gens, live)
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

    def _schedule(self, gens, live) -> None:
        while live:
            progressed = False
            for w in live:
                if w.waiting is not None and w.waiting[0] == "mbarrier":
                    _, _, bar, parity = w.waiting
                    if not _phase_done(bar, parity):
                        continue
                    w.waiting = None
                if w.waiting is not None:
                    continue
                try:
                    w.waiting = next(gens[w.index])
                except StopIteration:
                    w.done = True
                progressed = True
            live = [w for w in live if not w.done]
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
            if not progressed and live:
                if self._land_transactions():
                    continue
                if at_barrier:
                    blocked = next(w for w in live if w.waiting[0] != "barrier")
                    w0 = at_barrier[0]
                    raise self._error(w0.waiting[1], f"deadlock: warp {blocked.index} never reaches this barrier", w0)
                w = live[0]
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


def _per_thread(t) -> tuple[int, ...]:
    if isinstance(t, TensorType):
        return t.shape
    if isinstance(t, FragType):
        return (t.per_lane,)
    return ()


def _full(mask, t, value) -> np.ndarray:
    et = element_type(t)
    return quantize(np.full((len(mask), *_per_thread(t)), value), et)


# ---- simple ops ------------------------------------------------------------------------------------------------
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


# ---- memory accesses -------------------------------------------------------------------------------------------
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
    else:
        _check_shared_write(sim, op, mem, a, tids, w)
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


# ---- blocking and structured ops (generators) ------------------------------------------------------------------
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


# ---- tensor cores ----------------------------------------------------------------------------------------------
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
}
