"""The loop level's reference interpreter (numpy), vectorized over loops.

A loop nest is not run iteration by iteration: every loop is an axis. A value computed at loop depth d is an array
whose axis k stands for the k-th enclosing loop (size 1 where it does not depend on that loop), so one numpy call
evaluates an op for all iterations at once; a loop.reduce evaluates its body with one more axis and folds that axis
with its monoid. Loops whose iteration space would exceed `MAX_ELEMENTS` run in chunks (a reduction combines the
chunks' partial carriers with its monoid's combine), so memory stays bounded on large shapes.

Buffers are numpy arrays (bf16 held in float32, rounded by `scalar_ops.quantize`). Fresh `loop.buffer`s start as
NaN (floats), so a kernel that reads an element no one wrote shows up in the results instead of passing silently;
the buffer a function returns as a state starts as the state's value on entry (its argument), as the runtime,
which keeps both in one place, sees it.
"""

from __future__ import annotations

import numpy as np

from irforge.builtin import ReturnOp
from irforge.diagnostics import error
from irforge.interpreter import bind_inputs, entry_function, param_value
from irforge.ir import Operation, Value
from irforge.scalar_ops import evaluate, numpy_dtype, quantize
from irforge.types import index

from ..scalar import CastOp, ConstOp, ScalarMathOp
from . import BufferOp, ForOp, IndexOp, KernelOp, LoadOp, ParamOp, ReduceOp, StoreOp, YieldOp, indexing

MAX_ELEMENTS = 1 << 22  # largest iteration space evaluated in one numpy call (elements)


def interpret(module: Operation, inputs=None, params=None, *, entry: str = "forward", seed: int = 0) -> list:
    """Run the entry function (see `irforge.interpreter.interpret`: inputs by position or name, params by name,
    missing ones drawn at random from `seed`); returns its results."""
    func = entry_function(module, entry)
    bounds = gather_index_bounds(func)
    buffers: dict[Value, np.ndarray] = dict(zip(func.body.args, bind_inputs(func, inputs, seed, bounds)))
    ret = func.body.ops[-1]
    state = {ret.operands[pos]: buffers[arg] for _, arg, pos in func.state_pairs()}  # result buffer -> entry value
    for op in func.body.ops:
        if isinstance(op, ParamOp):
            t = op.result.type
            buffers[op.result] = param_value(op.attributes["sym"].name, t, params, seed, bounds.get(op.result))
        elif isinstance(op, BufferOp) and op.result in state:  # a state's buffer: it holds the state on entry
            buffers[op.result] = state[op.result].copy()
        elif isinstance(op, BufferOp):
            t = op.result.type
            fill = np.nan if t.dtype.is_float else 0
            buffers[op.result] = np.full(t.shape, fill, dtype=numpy_dtype(t.dtype))
        elif isinstance(op, KernelOp):
            _Kernel(buffers).block(op.body, {}, ())
        elif isinstance(op, ReturnOp):
            return [np.array(buffers[v]) for v in op.operands]
        else:
            raise op.error("has no meaning in the loop interpreter at function level")
    raise func.error("has no func.return")


def gather_index_bounds(func: Operation) -> dict:
    """For buffers whose elements are used as subscripts (gathers): the extent they index, so random ones fit (the
    tile interpreter draws its inputs by it too, so both levels see the same random inputs)."""
    bounds: dict = {}
    for op in func.walk():
        if isinstance(op, CastOp) and op.result.type == index and isinstance(op.operand.owner, indexing.LoadValueOp):
            src = op.operand.owner.buffer
            for user in op.result.users:
                if isinstance(user, (indexing.LoadValueOp, indexing.StoreValueOp)):
                    for e, n in zip(user.index_exprs(), user.buffer.type.shape):
                        if op.result in indexing.used_values(e):
                            bounds[src] = min(bounds.get(src, n), n)
    return bounds


class _Kernel:
    def __init__(self, buffers):
        self.buffers = buffers

    # `env` maps values defined in the kernel to arrays; `shape` is the iteration shape (one extent per loop).
    def block(self, block, env: dict, shape: tuple) -> None:
        for op in block.ops:
            self.op(op, env, shape)

    def get(self, v: Value, env: dict, depth: int) -> np.ndarray:
        x = env[v]
        return x.reshape(x.shape + (1,) * (depth - x.ndim)) if x.ndim < depth else x

    def op(self, op: Operation, env: dict, shape: tuple) -> None:
        d = len(shape)
        if isinstance(op, ScalarMathOp):
            args = [self.get(v, env, d) for v in op.operands]
            env[op.result] = evaluate(op.fn, args, op.result.type)
        elif isinstance(op, LoadOp):
            buf = self.buffers[op.buffer]
            idx = self.subscripts(op, env, d, buf.shape)
            env[op.result] = buf[idx]
        elif isinstance(op, StoreOp):
            buf = self.buffers[op.buffer]
            idx = self.subscripts(op, env, d, buf.shape)
            value = self.get(op.value, env, d)
            *idx, value = np.broadcast_arrays(*idx, value)
            buf[tuple(idx)] = value
        elif isinstance(op, ConstOp):
            env[op.result] = quantize(np.array(op.attributes["value"]), op.result.type)
        elif isinstance(op, CastOp):
            with np.errstate(all="ignore"):
                env[op.result] = quantize(self.get(op.operand, env, d), op.result.type)
        elif isinstance(op, IndexOp):
            dims = {v: self.get(v, env, d) for v in op.indices}
            env[op.result] = np.asarray(op.index_expr().evaluate(dims), dtype=np.int64)
        elif isinstance(op, ForOp):
            for lo, hi in self.chunks(op, shape):
                inner = dict(env)
                inner[op.iv] = np.arange(lo, hi).reshape((1,) * d + (hi - lo,))
                self.block(op.body, inner, (*shape, hi - lo))
        elif isinstance(op, ReduceOp):
            self.reduce(op, env, shape)
        elif not isinstance(op, YieldOp):  # a reduction reads its body's yield itself
            raise error(f"the loop interpreter cannot run '{op.name}'", op.loc)

    def chunks(self, op, shape):
        step = max(1, MAX_ELEMENTS // max(1, int(np.prod(shape, dtype=np.int64))))
        return [(lo, min(lo + step, op.extent)) for lo in range(0, op.extent, step)]

    def reduce(self, op: ReduceOp, env: dict, shape: tuple) -> None:
        d = len(shape)
        carriers = op.carriers
        acc = [tuple(quantize(np.array(v), r.type) for v, r in zip(init, results)) for _, init, results in carriers]
        for lo, hi in self.chunks(op, shape):
            inner = dict(env)
            inner[op.iv] = np.arange(lo, hi).reshape((1,) * d + (hi - lo,))
            self.block(op.body, inner, (*shape, hi - lo))
            ys = [self.get(v, inner, d + 1) for v in op.yielded]
            full = list(np.broadcast_shapes(*(y.shape for y in ys)))
            full[d] = hi - lo
            ys = [np.broadcast_to(y, full) for y in ys]
            at = 0
            for k, (monoid, _, results) in enumerate(carriers):
                n = len(results)
                types = [r.type for r in results]
                partial = monoid.reduce(tuple(ys[at : at + n]), d, types)
                acc[k] = monoid.combine(acc[k], partial, types)
                at += n
        for (_, _, results), values in zip(carriers, acc):
            for r, v in zip(results, values):
                env[r] = np.asarray(v)

    def subscripts(self, op, env: dict, depth: int, dims: tuple) -> tuple:
        values = {v: self.get(v, env, depth) for v in op.indices}
        idx = []
        for k, (e, size) in enumerate(zip(op.index_exprs(), dims)):
            i = np.asarray(e.evaluate(values), dtype=np.int64)
            if i.size and (i.min() < 0 or i.max() >= size):
                bad = int(i.min()) if i.min() < 0 else int(i.max())
                what = "load" if isinstance(op, LoadOp) else "store"
                raise error(f"{what} out of bounds: subscript {k} reaches {bad} in a dimension of size {size}", op.loc)
            idx.append(i)
        return tuple(idx)
