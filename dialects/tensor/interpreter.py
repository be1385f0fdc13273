"""The tensor dialect's reference interpreter (numpy), the oracle for the tensor level and the passes around it.

Semantics are those of docs/dialects/tensor.md: elementwise ops evaluate `irforge.scalar_ops` (half types compute
in float32 and round per op), reductions accumulate in the element type (the IR casts half types to f32 first when
it wants an f32 accumulator), index maps and gathers read the input at computed coordinates.

A contraction -- `reduce add` of a `mul` of two index maps that only broadcast and permute (a decomposed matmul) --
is evaluated with `numpy.einsum` on the index maps' inputs instead of materializing the [..., M, N, K] product,
so checking real layer sizes stays fast. It computes the same sum (f32 and f64 only, where the product rounds
nowhere the einsum does not).
"""

from __future__ import annotations

import numpy as np

from irforge.diagnostics import error
from irforge.index_expr import Const, Dim
from irforge.interpreter import bind_inputs, entry_function, param_value
from irforge.ir import Operation
from irforge.scalar_ops import MONOIDS, compute_dtype, evaluate, numpy_dtype, quantize


def interpret(module: Operation, inputs=None, params=None, *, entry: str = "forward", seed: int = 0) -> list:
    func = entry_function(module, entry)
    bounds = gather_index_bounds(func)
    env = dict(zip(func.body.args, bind_inputs(func, inputs, seed, bounds)))
    contractions, skipped = _find_contractions(func)
    for op in func.body.ops:
        if op.name == "func.return":
            return [np.array(env[v]) for v in op.operands]
        if op in skipped:
            continue
        if op.name == "tensor.param":
            env[op.result] = param_value(op.attributes["sym"].name, op.result.type, params, seed, bounds.get(op.result))
        elif op in contractions:
            env[op.result] = _contract(op, *contractions[op], env)
        else:
            env[op.result] = evaluate_op(op, [env[v] for v in op.operands])
    raise func.error("has no func.return")


def _projection(v) -> Operation | None:
    """The index map defining `v`, when each of its coordinates is a result dimension or 0 (broadcast/permute)."""
    op = getattr(v, "op", None)
    if op is None or op.name != "tensor.index_map" or len(v.uses) != 1:
        return None
    ok = all(isinstance(e, Dim) or (e == Const(0)) for e in op.attributes["map"].results)
    return op if ok else None


def _find_contractions(func: Operation):
    """reduce(add) of mul(index_map(a), index_map(b)), the product used only there, in f32 or f64."""
    found, skipped = {}, set()
    for op in func.body.ops:
        if op.name != "tensor.reduce" or op.attributes["kind"] != "add":
            continue
        mul = getattr(op.input, "op", None)
        if mul is None or mul.name != "tensor.elementwise" or mul.attributes["op"] != "mul":
            continue
        if len(mul.result.uses) != 1 or mul.result.type.dtype.name not in ("f32", "f64"):
            continue
        maps = [_projection(v) for v in mul.operands]
        if None in maps:
            continue
        found[op] = (maps[0], maps[1])
        skipped |= {mul, *maps}
    return found, skipped


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _contract(op: Operation, ma: Operation, mb: Operation, env) -> np.ndarray:
    shape = ma.result.type.shape  # the product's shape
    axes = set(op.attributes["axes"])
    if len(shape) > len(_LETTERS):
        raise op.error("has too many dimensions for the interpreter's contraction")
    operands, subscripts = [], []
    for m in (ma, mb):
        x = env[m.input]
        exprs = m.attributes["map"].results
        # coordinates fixed at 0 (size-1 dims broadcast) are read once; the others name a product dimension
        x = x[tuple(0 if e == Const(0) else slice(None) for e in exprs)]
        operands.append(x.astype(compute_dtype(op.result.type.dtype), copy=False))
        subscripts.append("".join(_LETTERS[e.index] for e in exprs if isinstance(e, Dim)))
    used = set("".join(subscripts))
    out = "".join(_LETTERS[i] for i in range(len(shape)) if i not in axes and _LETTERS[i] in used)
    r = np.einsum(f"{subscripts[0]},{subscripts[1]}->{out}", *operands)
    for i in sorted(axes):  # a summed dimension neither operand reads adds up identical copies
        if _LETTERS[i] not in used:
            r = r * shape[i]
    # back to the reduce's shape: reduced axes kept as 1, dimensions neither operand reads broadcast
    kept = [i for i in range(len(shape)) if i not in axes and _LETTERS[i] in used]
    full = [1] * len(shape)
    for i, n in zip(kept, r.shape):
        full[i] = n
    r = r.reshape(full)
    return quantize(np.broadcast_to(r, op.result.type.shape), op.result.type.dtype)


def evaluate_op(op: Operation, args: list[np.ndarray]) -> np.ndarray:
    """One tensor op (not `tensor.param`) on its operands' values: for interpreters of IR mixing levels."""
    run = _RUN.get(op.name)
    if run is None:
        raise op.error("has no meaning in the tensor interpreter")
    return run(op, args)


def gather_index_bounds(func: Operation) -> dict:
    """For values used as gather indices: the extent they index, so random ones stay in range."""
    bounds = {}
    for op in func.walk():
        if op.name == "tensor.gather":
            n = op.input.type.shape[op.attributes["axis"]]
            v = op.indices
            while True:  # index maps only move values: the bound belongs to the input or param they come from
                bounds[v] = min(bounds.get(v, n), n)
                producer = getattr(v, "op", None)
                if producer is None or producer.name != "tensor.index_map":
                    break
                v = producer.input
    return bounds


def _coords(shape) -> list[np.ndarray]:
    """Broadcastable coordinate grids of `shape` (one per dimension), as index expressions evaluate them."""
    return [np.arange(n).reshape([n if i == k else 1 for i in range(len(shape))]) for k, n in enumerate(shape)]


def _index(exprs, shape) -> tuple:
    grid = _coords(shape)
    return tuple(np.broadcast_to(np.asarray(e.evaluate(grid)), shape) for e in exprs)


def _constant(op, args):
    t = op.result.type
    return quantize(np.full(t.shape, op.attributes["value"], dtype=np.float64 if t.dtype.is_float else None), t.dtype)


def _iota(op, args):
    t = op.result.type
    return _index([Dim(op.attributes["dim"])], t.shape)[0].astype(numpy_dtype(t.dtype))


def _elementwise(op, args):
    return evaluate(op.attributes["op"], args, op.result.type.dtype)


def _reduce(op, args):
    (x,) = args
    t = op.result.type
    m = MONOIDS[op.attributes["kind"]]
    axes = tuple(op.attributes["axes"])
    if x.size == 0 or not axes:
        if x.size == 0:
            return np.full(t.shape, m.identity(t.dtype), dtype=numpy_dtype(t.dtype))
        return x.copy()
    x = x.astype(compute_dtype(t.dtype), copy=False)
    with np.errstate(all="ignore"):
        return quantize(m.numpy_reduce(x, axis=axes, keepdims=True), t.dtype)


def _index_map(op, args):
    (x,) = args
    shape = op.result.type.shape
    return np.broadcast_to(x[_index(op.attributes["map"].results, shape)], shape)  # a 0-d input is read as is


def _gather(op, args):
    x, idx = args
    shape = op.result.type.shape
    a = op.attributes
    picked = idx[_index(a["index_map"].results, shape)].astype(np.int64)
    n = x.shape[a["axis"]]
    bad = (picked < 0) | (picked >= n)
    if bad.any():
        raise error(f"gather index {int(picked[bad].flat[0])} is out of range 0..{n - 1}", op.loc)
    coords = list(_index(a["map"].results, shape))
    coords.insert(a["axis"], picked)
    return x[tuple(coords)]


def _scatter(op, args):
    base, idx, updates = args
    axis = op.attributes["axis"]
    n = base.shape[axis]
    bad = (idx < 0) | (idx >= n)
    if bad.any():
        raise error(f"scatter index {int(idx[bad][0])} is out of range 0..{n - 1}", op.loc)
    out = base.copy()
    out[(slice(None),) * axis + (idx.astype(np.int64),)] = updates
    return out


_RUN = {
    "tensor.constant": _constant,
    "tensor.iota": _iota,
    "tensor.elementwise": _elementwise,
    "tensor.reduce": _reduce,
    "tensor.index_map": _index_map,
    "tensor.gather": _gather,
    "tensor.scatter": _scatter,
}
