"""The tile level's reference interpreter: the schedule's own semantics on numpy, for tiny shapes.

A launch runs every thread of every block at once: a value is an array with one entry per thread of the grid
(thread `n` is thread `n % T` of block `n // T`), and a mask says which threads are executing. A loop distributed
`by` hardware axes runs trip after trip: in trip k, unit u works on work item `u + k * P` if it exists (the unit's
threads are masked out otherwise); a work item's `vector` iterations run one after the other. A loop without `by`
runs whole in every executing thread. A `tile.reduce` folds each iteration's element into its carriers with each
monoid's combine; a `tile.combine` folds the carriers of the threads that differ only along its axes; a
`tile.stage` copies a box of a buffer into each block's shared memory; a store happens in the one thread per point
that the single-writer rule names (docs/dialects/tile.md).

It reports, at the op: an element stored by two threads in one launch, a store whose value or place differs
between threads the single-writer rule stores once for, a combine or a stage reached by part of the threads that
must reach it together, a stage whose box differs across its block, loads and stores out of
bounds (of the buffer, or of the staged box). Fresh `tile.buffer`s start as NaN (floats), so a result nobody
wrote shows.
"""

from __future__ import annotations

import math

import numpy as np

from irforge.builtin import ReturnOp
from irforge.diagnostics import error
from irforge.interpreter import bind_inputs, entry_function, param_value
from irforge.ir import Operation, Value
from irforge.scalar_ops import evaluate, numpy_dtype, quantize

from ..loop.interpreter import gather_index_bounds
from ..scalar import CastOp, ConstOp, ScalarMathOp
from . import (
    AXES,
    BufferOp,
    CombineOp,
    ForOp,
    IndexOp,
    KernelOp,
    LoadOp,
    LoopOp,
    ParamOp,
    ReduceOp,
    StageOp,
    StoreOp,
    YieldOp,
    enclosing_loops,
)
from .columns import writer_axes


def interpret(module: Operation, inputs=None, params=None, *, entry: str = "forward", seed: int = 0) -> list:
    """Run the entry function (see `irforge.interpreter.interpret`); returns its results."""
    func = entry_function(module, entry)
    bounds = gather_index_bounds(func)
    buffers: dict[Value, np.ndarray] = dict(zip(func.body.args, bind_inputs(func, inputs, seed, bounds)))
    for op in func.body.ops:
        if isinstance(op, ParamOp):
            t = op.result.type
            buffers[op.result] = param_value(op.attributes["sym"].name, t, params, seed, bounds.get(op.result))
        elif isinstance(op, BufferOp):
            t = op.result.type
            fill = np.nan if t.dtype.is_float else 0
            buffers[op.result] = np.full(t.shape, fill, dtype=numpy_dtype(t.dtype))
        elif isinstance(op, KernelOp):
            Launch(op, buffers).run()
        elif isinstance(op, ReturnOp):
            return [np.array(buffers[v]) for v in op.operands]
        else:
            raise op.error("has no meaning in the tile interpreter at function level")
    raise func.error("has no func.return")


class _Staged:
    """A staged box in every block's shared memory: `data[g]` is block g's copy."""

    def __init__(self, data: np.ndarray):
        self.data = data


class Launch:
    """One kernel launch: the grid's threads, their hardware indices, and the buffers they share."""

    def __init__(self, kernel: KernelOp, buffers: dict):
        self.kernel = kernel
        self.buffers = buffers
        self.grid = kernel.attributes["grid"]
        self.block = kernel.attributes["block"]
        self.G = math.prod(self.grid)
        self.T = math.prod(self.block)
        self.N = self.G * self.T
        n = np.arange(self.N, dtype=np.int64)
        g, t = n // self.T, n % self.T
        gx, gy, _ = self.grid
        bx, by, _ = self.block
        self.hw = {
            "blockIdx.x": g % gx,
            "blockIdx.y": (g // gx) % gy,
            "blockIdx.z": g // (gx * gy),
            "threadIdx.x": t % bx,
            "threadIdx.y": (t // bx) % by,
            "threadIdx.z": t // (bx * by),
        }
        self.block_of = g
        # Who stored each element in this launch (-1: nobody yet), per written buffer: the race check.
        self.writer: dict[Value, np.ndarray] = {}
        self.single_writer: dict[Operation, np.ndarray] = {}

    def run(self) -> None:
        with np.errstate(all="ignore"):  # masked-out threads compute garbage; it is never stored
            self.block_ops(self.kernel.body, {}, np.ones(self.N, dtype=bool))

    # ---- structure ----------------------------------------------------------------------------------------------
    # A value is an array whose axis 0 is the thread (size N, or 1 when all threads agree) and whose further axes
    # are the loops being run "at once" around it (size 1 where it does not vary); the mask has all of them.
    @staticmethod
    def get(env: dict, v: Value, mask: np.ndarray) -> np.ndarray:
        x = np.asarray(env[v])
        return x.reshape(x.shape + (1,) * (mask.ndim - x.ndim)) if 0 < x.ndim < mask.ndim else x

    def block_ops(self, block, env: dict, mask: np.ndarray) -> None:
        for op in block.ops:
            self.op(op, env, mask)

    def units(self, loop: LoopOp) -> tuple[np.ndarray, int]:
        """Each thread's unit of the loop's distribution, and the number of units."""
        u, p = np.zeros(self.N, dtype=np.int64), 1
        for a in loop.bind:
            size = self.kernel.axis_size(a)
            u = u * size + self.hw[a]
            p *= size
        return u, p

    def at_once(self, loop: LoopOp, mask: np.ndarray) -> tuple[np.ndarray, list]:
        """Every iteration of `loop` as one more axis: the new mask and the loop indices over it."""
        w_count, v = loop.work_items, loop.vector
        pad = (1,) * (mask.ndim - 1)
        if loop.bind:
            u, p = self.units(loop)
            trips = -(-w_count // p)
            w = u.reshape((self.N, *pad, 1)) + np.arange(trips) * p
        else:
            w = np.arange(w_count).reshape((1, *pad, w_count))
        live = np.repeat(w < w_count, v, axis=-1)
        ivs = _iterations(loop, np.where(w < w_count, w, 0)[..., None], _lanes(loop))
        return mask[..., None] & live, [i.reshape((*i.shape[:-2], -1)) for i in ivs]

    def trip_by_trip(self, loop: LoopOp, mask: np.ndarray):
        """Yield (mask, loop indices) per iteration, in order: for loops whose body needs its threads together."""
        w_count = loop.work_items
        if loop.bind:
            u, p = self.units(loop)
            items = ((u + k * p, mask & (u + k * p < w_count)) for k in range(-(-w_count // p)))
        else:
            items = ((np.int64(w), mask) for w in range(w_count))
        lanes = _lanes(loop)
        for w, m in items:
            if m.any():
                for lane in range(loop.vector):
                    yield m, _iterations(loop, np.where(m, w, 0), [x[lane] for x in lanes])

    def op(self, op: Operation, env: dict, mask: np.ndarray) -> None:
        if isinstance(op, ScalarMathOp):
            env[op.result] = evaluate(op.fn, [self.get(env, v, mask) for v in op.operands], op.result.type)
        elif isinstance(op, ConstOp):
            env[op.result] = quantize(np.array(op.attributes["value"]), op.result.type)
        elif isinstance(op, CastOp):
            env[op.result] = quantize(np.asarray(env[op.operand]), op.result.type)
        elif isinstance(op, IndexOp):
            dims = {v: self.get(env, v, mask) for v in op.indices}
            env[op.result] = np.asarray(op.index_expr().evaluate(dims), dtype=np.int64)
        elif isinstance(op, LoadOp):
            env[op.result] = self.load(op, env, mask)
        elif isinstance(op, StoreOp):
            self.store(op, env, mask)
        elif isinstance(op, ForOp):
            if _collective(op):
                for m, ivs in self.trip_by_trip(op, mask):
                    env.update(zip(op.ivs, ivs))
                    self.block_ops(op.body, env, m)
            else:
                inner, ivs = self.at_once(op, mask)
                env.update(zip(op.ivs, ivs))
                self.block_ops(op.body, env, inner)
        elif isinstance(op, ReduceOp):
            self.reduce(op, env, mask)
        elif isinstance(op, CombineOp):
            self.combine(op, env, mask)
        elif isinstance(op, StageOp):
            self.stage(op, env, mask)
        elif not isinstance(op, YieldOp):
            raise error(f"the tile interpreter cannot run '{op.name}'", op.loc)

    # ---- reductions ---------------------------------------------------------------------------------------------
    def reduce(self, op: ReduceOp, env: dict, mask: np.ndarray) -> None:
        acc = [tuple(quantize(np.array(x), r.type) for x, r in zip(init, rs)) for _, init, rs in op.carriers]
        if _collective(op):
            for m, ivs in self.trip_by_trip(op, mask):
                env.update(zip(op.ivs, ivs))
                self.block_ops(op.body, env, m)
                elements = self._split([self.get(env, v, m) for v in op.yielded], op)
                for k, (monoid, _, results) in enumerate(op.carriers):
                    new = monoid.combine(acc[k], elements[k], [r.type for r in results])
                    acc[k] = tuple(np.where(m, b, a) for a, b in zip(acc[k], new))
        else:
            inner, ivs = self.at_once(op, mask)
            env.update(zip(op.ivs, ivs))
            self.block_ops(op.body, env, inner)
            elements = self._split([self.get(env, v, inner) for v in op.yielded], op)
            full = bool(inner.all())
            for k, (monoid, _, results) in enumerate(op.carriers):
                types = [r.type for r in results]
                # Iterations a thread does not run contribute the identity; then fold the loop's axis.
                comps = tuple(
                    np.broadcast_to(y, inner.shape)
                    if full
                    else np.where(inner, y, quantize(np.array(monoid.identity(t, i)), t))
                    for i, (y, t) in enumerate(zip(elements[k], types))
                )
                acc[k] = monoid.combine(acc[k], monoid.reduce(comps, inner.ndim - 1, types), types)
        for (_, _, results), values in zip(op.carriers, acc):
            env.update(zip(results, values))

    @staticmethod
    def _split(values: list, op: ReduceOp) -> list[tuple]:
        out, at = [], 0
        for _, _, results in op.carriers:
            out.append(tuple(values[at : at + len(results)]))
            at += len(results)
        return out

    def _grouped(self, x) -> np.ndarray:
        """A per-thread array as (gz, gy, gx, bz, by, bx), the hardware axes as dimensions."""
        gx, gy, gz = self.grid
        bx, by, bz = self.block
        return np.broadcast_to(x, (self.N,)).reshape(gz, gy, gx, bz, by, bx)

    def combine(self, op: CombineOp, env: dict, mask: np.ndarray) -> None:
        dims = [
            ("blockIdx.z", "blockIdx.y", "blockIdx.x", "threadIdx.z", "threadIdx.y", "threadIdx.x").index(a)
            for a in op.over
        ]
        m = self._grouped(mask)
        if not np.array_equal(m.any(axis=tuple(dims), keepdims=True), m.all(axis=tuple(dims), keepdims=True)):
            raise error(
                f"'{op.name}' is reached by part of the threads it combines over ({', '.join(op.over)})", op.loc
            )
        at = 0
        for monoid, _, values in op.carriers:
            results = op.results[at : at + len(values)]
            at += len(values)
            types = [v.type for v in values]
            comps = [self._grouped(env[v]) for v in values]
            for d in dims:
                acc = tuple(np.take(c, [0], axis=d) for c in comps)
                for j in range(1, comps[0].shape[d]):
                    acc = monoid.combine(acc, tuple(np.take(c, [j], axis=d) for c in comps), types)
                comps = [np.broadcast_to(a, c.shape) for a, c in zip(acc, comps)]
            for v, r, c in zip(values, results, comps):
                env[r] = np.where(mask, c.reshape(self.N), env[v])

    # ---- memory -------------------------------------------------------------------------------------------------
    def _subscripts(self, op, env: dict, mask: np.ndarray, shape, what: str, compact: bool = False) -> tuple:
        """Each subscript of `op` as an array broadcast to the iteration space, checked against `shape` where the
        mask is on; where it is off, a subscript is any in-bounds one. `compact`: left unbroadcast (the caller
        broadcasts what it gathers) wherever that is possible."""
        values = {v: self.get(env, v, mask) for v in op.indices}
        # The subscripts are checked and used before broadcasting where they allow: they are mostly far smaller
        # than the iteration space (a thread's subscript does not vary along every loop around it), and a subscript
        # in bounds everywhere is in bounds under any mask.
        idx = []
        for k, (e, size) in enumerate(zip(op.index_exprs(), shape)):
            i = np.asarray(e.evaluate(values), dtype=np.int64)
            if i.size and (i.min() < 0 or i.max() >= size):
                live = np.broadcast_to(i, mask.shape)[mask]
                if live.size and (live.min() < 0 or live.max() >= size):
                    bad = int(live.min()) if live.min() < 0 else int(live.max())
                    raise error(
                        f"{what} out of bounds: subscript {k} reaches {bad} in a dimension of size {size}", op.loc
                    )
                i = np.where(mask, i, 0)
            idx.append(i if compact else np.broadcast_to(i, mask.shape))
        return tuple(idx)

    def load(self, op: LoadOp, env: dict, mask: np.ndarray) -> np.ndarray:
        src = env.get(op.buffer)
        if isinstance(src, _Staged):
            idx = self._subscripts(op, env, mask, src.data.shape[1:], "load from the staged box", compact=True)
            block = self.block_of.reshape((self.N,) + (1,) * (mask.ndim - 1))
            return np.broadcast_to(src.data[(block, *idx)], mask.shape)
        buf = self.buffers[op.buffer]
        idx = self._subscripts(op, env, mask, buf.shape, "load", compact=True)
        return np.broadcast_to(buf[idx] if buf.ndim else buf, mask.shape)

    def store(self, op: StoreOp, env: dict, mask: np.ndarray) -> None:
        buf = self.buffers[op.buffer]
        self._check_agreement(op, env, mask)
        sel = mask & self._single_writer(op).reshape((self.N,) + (1,) * (mask.ndim - 1))
        idx = self._subscripts(op, env, sel, buf.shape, "store")
        if not sel.any():
            return
        flat = (
            np.ravel_multi_index(tuple(i[sel] for i in idx), buf.shape) if buf.ndim else np.zeros(sel.sum(), np.int64)
        )
        threads = np.broadcast_to(np.arange(self.N).reshape((self.N,) + (1,) * (mask.ndim - 1)), mask.shape)[sel]
        writer = self.writer.setdefault(op.buffer, np.full(buf.size, -1, dtype=np.int64))
        order = np.lexsort((threads, flat))
        f, t = flat[order], threads[order]
        prev = writer[flat]
        if ((f[1:] == f[:-1]) & (t[1:] != t[:-1])).any() or ((prev >= 0) & (prev != threads)).any():
            raise error(
                "stores an element that another thread of the launch stores too (the schedule distributes the "
                "store's loop over fewer points than it has, or not at all)",
                op.loc,
            )
        writer[flat] = threads
        value = np.broadcast_to(np.asarray(self.get(env, op.value, mask)), mask.shape)[sel]
        buf.reshape(-1)[flat] = value

    def _check_agreement(self, op: StoreOp, env: dict, mask: np.ndarray) -> None:
        """The single-writer rule stores once for all threads that differ only along the launch axes no loop around
        the store distributes: they must agree on what and where, or the values of all but one are lost."""
        axes = [a for a in AXES if a not in writer_axes(op) and self.kernel.axis_size(a) > 1]
        if not axes:
            return
        writer = self._writer_of(axes)
        values = {v: self.get(env, v, mask) for v in op.indices}
        parts = [("value", self.get(env, op.value, mask))]
        parts += [(f"subscript {k}", e.evaluate(values)) for k, e in enumerate(op.index_exprs())]
        for what, x in parts:
            x = np.asarray(x)
            if x.ndim == 0 or x.shape[0] == 1:
                continue  # the same in every thread
            mine, theirs = x, x[writer]
            differ = ~(
                (mine == theirs) | (np.isnan(mine) & np.isnan(theirs)) if mine.dtype.kind == "f" else mine == theirs
            )
            if differ.ndim > mask.ndim:  # a register tile: any of its elements
                differ = differ.reshape((*differ.shape[: mask.ndim], -1)).any(axis=-1)
            differ = np.broadcast_to(differ, mask.shape) & mask
            if differ.any():
                at = np.unravel_index(np.argmax(differ), mask.shape)
                n, w = int(at[0]), int(writer[at[0]])
                raise error(
                    f"stores a {what} that differs between {self._thread(w)} and {self._thread(n)}, which differ only "
                    f"along {', '.join(axes)}: no loop around the store distributes that, so one thread stores for "
                    "all (the single-writer rule) and the others' values are lost (combine them first)",
                    op.loc,
                )

    def _writer_of(self, axes) -> np.ndarray:
        """For each thread, the thread with index 0 along `axes` and the same index along the others."""
        hw = {a: (np.zeros_like(i) if a in axes else i) for a, i in self.hw.items()}
        gx, gy, _ = self.grid
        bx, by, _ = self.block
        g = hw["blockIdx.x"] + gx * (hw["blockIdx.y"] + gy * hw["blockIdx.z"])
        return g * self.T + hw["threadIdx.x"] + bx * (hw["threadIdx.y"] + by * hw["threadIdx.z"])

    def _thread(self, n: int) -> str:
        t = tuple(int(self.hw[f"threadIdx.{c}"][n]) for c in "xyz")
        b = tuple(int(self.hw[f"blockIdx.{c}"][n]) for c in "xyz")
        return f"thread {t} of block {b}"

    def _single_writer(self, op: StoreOp) -> np.ndarray:
        """The threads that carry out this store: index 0 along every launch axis no enclosing loop distributes."""
        got = self.single_writer.get(op)
        if got is None:
            bound = writer_axes(op)
            got = np.ones(self.N, dtype=bool)
            for a in AXES:
                if a not in bound and self.kernel.axis_size(a) > 1:
                    got &= self.hw[a] == 0
            self.single_writer[op] = got
        return got

    def stage(self, op: StageOp, env: dict, mask: np.ndarray) -> None:
        m = reached = mask.reshape(self.G, self.T)
        if _in_ghost_lanes(op, self.kernel):  # ghost lanes (the atoms' top half) stage with the rest in hardware
            reached = np.repeat(m[:, :1], self.T, axis=1)
        if not np.array_equal(reached.any(axis=1), reached.all(axis=1)):
            raise error(
                f"'{op.name}' is reached by part of a block's threads; they must stage the box together", op.loc
            )
        src = self.buffers[op.source]
        values = {v: env[v] for v in op.indices}
        offsets = []
        for e in op.index_exprs():
            o = np.broadcast_to(np.asarray(e.evaluate(values), dtype=np.int64), (self.N,)).reshape(self.G, self.T)
            live = np.where(m, o, o[:, :1])
            if not (live == live[:, :1]).all():
                raise error(f"'{op.name}' has a box whose position differs between threads of one block", op.loc)
            offsets.append(np.where(m[:, 0], o[:, 0], 0))
        box = op.box
        active = m[:, 0]
        per_block = (self.G,) + (1,) * len(box)  # shape that broadcasts a per-block value over the box
        idx = []
        for d, (o, n) in enumerate(zip(offsets, box)):
            along = np.arange(n).reshape([n if k == d else 1 for k in range(len(box))])
            i = np.broadcast_to(o.reshape(per_block) + along, (self.G, *box))
            live = i[active]
            if live.size and (live.min() < 0 or live.max() >= src.shape[d]):
                raise error(f"'{op.name}' copies a box that leaves the buffer along dimension {d}", op.loc)
            idx.append(np.where(active.reshape(per_block), i, 0))
        data = src[tuple(idx)] if box else np.broadcast_to(src, (self.G,))
        old = env.get(op.result)
        if isinstance(old, _Staged):  # a block that skips this trip keeps its copy (it will not read it)
            data = np.where(active.reshape(per_block), data, old.data)
        env[op.result] = _Staged(np.array(data))


def _in_ghost_lanes(op: Operation, kernel) -> bool:
    """Whether `op` sits in a loop laid out on an atom whose last lanes hold ghost rows: there every thread of the
    block runs it (`ForOp.one_item_a_unit`), though the interpreter masks the ghosts' points off."""
    return any(isinstance(lp, ForOp) and lp.ghost_lanes(kernel) for lp in enclosing_loops(op))


def _collective(loop: LoopOp) -> bool:
    """Whether the loop's body holds ops its threads must reach together (combines, stages): it then runs trip by
    trip; any other loop runs all its iterations at once, as an array axis."""
    return any(isinstance(x, (CombineOp, StageOp)) for x in loop.walk())


def _lanes(loop: LoopOp) -> list[np.ndarray]:
    """Each dimension's lane of every iteration of a work item, in order (row-major over the vector box)."""
    box = loop.vector_shape
    return [g.reshape(-1) for g in np.meshgrid(*[np.arange(n) for n in box], indexing="ij")] if box else []


def _iterations(loop: LoopOp, w, lanes) -> list[np.ndarray]:
    """The loop indices of work item(s) `w` at lane(s) `lanes` (one per dimension), as the loop's layout says."""
    layout = loop.layout
    coords = layout.work_coords(np.asarray(w, dtype=np.int64))
    return [np.asarray(layout.index(d, c, lane), dtype=np.int64) for d, (c, lane) in enumerate(zip(coords, lanes))]
