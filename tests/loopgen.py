"""A naive reference interpreter of loop-level programs (to check the real one against), and strategies for the
tensor-level programs the fusion passes must handle.

`naive_interpret` runs a program one iteration at a time with Python loops and folds reductions with each monoid's
`combine` program, the definition the vectorized interpreter's fast paths must agree with.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from irforge.dialects.loop import BufferOp, ForOp, IndexOp, KernelOp, LoadOp, ReduceOp, StoreOp, YieldOp
from irforge.dialects.scalar import CastOp, ConstOp, ScalarMathOp

from irforge.builtin import FuncOp, ModuleOp, ReturnOp
from irforge.scalar_ops import evaluate, quantize
from irforge.testing.strategies import shapes
from irforge.types import f32, tensor


def random_inputs(module, seed=0):
    rng = np.random.default_rng(seed)
    f = next(op for op in module.body.ops if isinstance(op, FuncOp))
    return [quantize(rng.standard_normal(a.type.shape).astype(np.float32), a.type.dtype) for a in f.args]


# ---- the naive reference --------------------------------------------------------------------------------------
def naive_interpret(module, args):
    f = next(op for op in module.body.ops if isinstance(op, FuncOp))
    mem = {a: quantize(np.asarray(x), a.type.dtype) for a, x in zip(f.args, args)}
    for op in f.body.ops:
        if isinstance(op, BufferOp):
            t = op.result.type
            mem[op.result] = np.full(t.shape, np.nan, dtype=quantize(np.zeros(()), t.dtype).dtype)
        elif isinstance(op, KernelOp):
            _naive_block(op.body, {}, mem)
        elif isinstance(op, ReturnOp):
            return [np.array(mem[v]) for v in op.operands]
    raise AssertionError("no func.return")


def _naive_block(block, env, mem):
    for op in block.ops:
        if isinstance(op, ScalarMathOp):
            env[op.result] = evaluate(op.fn, [np.asarray(env[v]) for v in op.operands], op.result.type)
        elif isinstance(op, ConstOp):
            env[op.result] = quantize(np.asarray(op.attributes["value"]), op.result.type)
        elif isinstance(op, CastOp):
            with np.errstate(all="ignore"):
                env[op.result] = quantize(np.asarray(env[op.operand]), op.result.type)
        elif isinstance(op, IndexOp):
            env[op.result] = int(op.index_expr().evaluate(env))
        elif isinstance(op, LoadOp):
            idx = tuple(int(e.evaluate(env)) for e in op.index_exprs())
            env[op.result] = mem[op.buffer][idx]
        elif isinstance(op, StoreOp):
            idx = tuple(int(e.evaluate(env)) for e in op.index_exprs())
            mem[op.buffer][idx] = env[op.value]
        elif isinstance(op, ForOp):
            for i in range(op.extent):
                _naive_block(op.body, {**env, op.iv: i}, mem)
        elif isinstance(op, ReduceOp):
            accs = [tuple(quantize(np.asarray(v), r.type) for v, r in zip(init, rs)) for _, init, rs in op.carriers]
            for i in range(op.extent):
                inner = {**env, op.iv: i}
                _naive_block(op.body, inner, mem)
                ys = [inner[v] for v in op.yielded]
                at = 0
                for k, (m, _, rs) in enumerate(op.carriers):
                    accs[k] = m.combine(accs[k], tuple(ys[at : at + len(rs)]), [r.type for r in rs])
                    at += len(rs)
            for (_, _, rs), acc in zip(op.carriers, accs):
                env.update(zip(rs, acc))
        elif not isinstance(op, YieldOp):
            raise AssertionError(f"naive interpreter: unexpected {op.name}")


# ---- tensor-level programs the fusion passes must handle -------------------------------------------------------
def tensor_module(arg_types, names, build):
    """A tensor-level module: `build(builder, *args)` returns the outputs of `func.func @forward`."""
    from irforge.dialects.tensor.builder import TensorBuilder

    func = FuncOp.build("forward", arg_types, [], arg_hints=names)
    module = ModuleOp()
    module.body.append(func)
    outs = build(TensorBuilder(block=func.body), *func.body.args)
    func.body.append(ReturnOp(list(outs)))
    ft = func.attributes["function_type"]
    func.attributes["function_type"] = type(ft)(ft.inputs, tuple(v.type for v in outs))
    return module


def matmul(b, x, w):
    """x[..., k] @ w[k, n] as the tensor level spells it: broadcast both to [..., k, n], multiply, reduce k."""
    from irforge.index_expr import Dim

    *lead, k = x.type.shape
    n = w.type.shape[1]
    r = len(lead)
    shape = (*lead, k, n)
    xb = b.index_map(x, shape, [Dim(i) for i in range(r + 1)])
    wb = b.index_map(w, shape, [Dim(r), Dim(r + 1)])
    s = b.reduce("add", b.ew("mul", xb, wb), [r])
    return b.index_map(s, (*lead, n), [*(Dim(i) for i in range(r)), 0, Dim(r)])


def softmax(b, x, axis, log=False):
    m = b.reduce("max", x, [axis])
    e = b.ew("exp", b.ew("sub", x, m))
    s = b.reduce("add", e, [axis])
    if log:
        return b.ew("sub", b.ew("sub", x, m), b.ew("log", s))
    return b.ew("div", e, s)


@st.composite
def softmax_programs(draw):
    """Softmax (or log-softmax) over a random axis, with an optional prologue and epilogue, f32 or half types."""
    from irforge.types import bf16, f16

    dtype = draw(st.sampled_from([f32, f16, bf16]))
    shape = draw(shapes(min_rank=1, max_rank=3, max_dim=6))
    axis = draw(st.integers(0, len(shape) - 1))
    log = draw(st.booleans())
    scale = draw(st.sampled_from([None, 0.5, 3.0]))

    def build(b, x, y):
        h = b.ew("mul", x, scale) if scale is not None else x
        if draw(st.booleans()):
            h = b.ew("add", h, y)
        h = b.cast(h, f32) if dtype != f32 else h
        out = softmax(b, h, axis, log)
        out = b.cast(out, dtype) if dtype != f32 else out
        return [b.ew("mul", out, y) if draw(st.booleans()) else out]

    return tensor_module([tensor(dtype, *shape)] * 2, ["x", "y"], build)


@st.composite
def sibling_programs(draw):
    """Two reductions over one axis feeding one elementwise kernel: SwiGLU's gate and up, or mean and variance."""
    rows, k, n = draw(st.integers(1, 4)), draw(st.integers(1, 6)), draw(st.integers(1, 5))
    if draw(st.booleans()):

        def build(b, x):
            g = matmul(b, x, b.param("gate.weight", tensor(f32, k, n)))
            u = matmul(b, x, b.param("up.weight", tensor(f32, k, n)))
            return [b.ew("mul", b.ew("mul", g, b.ew("sigmoid", g)), u)]

        return tensor_module([tensor(f32, rows, k)], ["x"], build)

    def build(b, x):
        mean = b.ew("div", b.reduce("add", x, [1]), float(k))
        sq = b.ew("div", b.reduce("add", b.ew("mul", x, x), [1]), float(k))
        var = b.ew("sub", sq, b.ew("mul", mean, mean))
        return [b.ew("mul", b.ew("sub", x, mean), b.ew("rsqrt", b.ew("add", var, 1e-5)))]

    return tensor_module([tensor(f32, rows, k)], ["x"], build)


# ---- contractions as the torch level decomposes them -------------------------------------------------------------
PROLOGUES = ("none", "silu_mul", "cast", "scale")
EPILOGUES = ("none", "bias", "residual", "silu", "relu", "cast")


CONTRACTION_DIMS = st.sampled_from((1, 2, 3, 4, 8, 16))
CONTRACTION_KS = st.sampled_from((1, 3, 4, 8, 16, 32))


@st.composite
def contraction_programs(draw, dims=CONTRACTION_DIMS, ks=CONTRACTION_KS):
    """A contraction as `decompose-matmul` writes it (operands index-mapped to [..., M, N, K], multiplied, reduced
    over K in f32), with random batch dimensions (each in both operands or broadcast from one), a transposed A
    and/or B, a prologue on A (`silu(g) * u`, a cast from another type, a scale), an epilogue (bias, residual
    add, activation, cast), f32, f16 or bf16, and sometimes a trailing unit dimension on the result (the views
    HF models leave). `tensor-to-loop` makes it loop kernels."""
    from irforge.dialects.tensor.builder import accumulator_type
    from irforge.passes.torch_to_tensor.common import matmul as decomposed_matmul

    from irforge.types import bf16, f16

    dtype = draw(st.sampled_from([f32, f16, bf16]))
    acc = accumulator_type(dtype)
    m, n, k = draw(dims), draw(dims), draw(ks)
    batch = draw(st.lists(st.sampled_from((1, 2, 3)), max_size=2))
    sides = [draw(st.sampled_from(("both", "a", "b"))) for _ in batch]
    a_batch = [d if s != "b" else 1 for d, s in zip(batch, sides)]
    b_batch = [d if s != "a" else 1 for d, s in zip(batch, sides)]
    if b_batch and all(d == 1 for d in b_batch) and draw(st.booleans()):
        b_batch = []  # a weight without batch dimensions (nn.Linear's)
    a_t, b_t = draw(st.booleans()), draw(st.booleans())
    prologue, epilogue = draw(st.sampled_from(PROLOGUES)), draw(st.sampled_from(EPILOGUES))
    unit = draw(st.booleans())
    a_shape = (*a_batch, *((k, m) if a_t else (m, k)))
    out_shape = (*(batch if len(batch) else ()), m, n)
    names = ["g", "u"] if prologue == "silu_mul" else ["x"]
    a_type = f32 if prologue == "cast" and dtype != f32 else dtype
    args = [tensor(a_type, *a_shape)] * len(names)
    if epilogue == "residual":
        args.append(tensor(dtype, *out_shape))
        names.append("res")

    def build(b, *xs):
        if prologue == "silu_mul":
            g, u = xs[0], xs[1]
            a = b.ew("mul", b.ew("mul", g, b.ew("sigmoid", g)), u)
        elif prologue == "cast":
            a = b.cast(xs[0], dtype)
        elif prologue == "scale":
            a = b.ew("mul", xs[0], 0.5)
        else:
            a = xs[0]
        if a_t:
            r = len(a_shape)
            a = b.permute(a, [*range(r - 2), r - 1, r - 2])
        w = b.param("w", tensor(dtype, *b_batch, *((n, k) if b_t else (k, n))))
        y = decomposed_matmul(b, a, w, w_transposed=b_t, out_dtype=acc)
        if epilogue == "bias":
            y = b.ew("add", y, b.cast(b.param("bias", tensor(dtype, n)), acc))
        elif epilogue == "residual":
            y = b.ew("add", y, b.cast(xs[-1], acc))
        elif epilogue == "silu":
            y = b.ew("mul", y, b.ew("sigmoid", y))
        elif epilogue == "relu":
            y = b.ew("maximum", y, 0.0)
        y = b.cast(y, f16 if epilogue == "cast" and dtype == f32 else dtype)
        return [b.reshape(y, (*y.type.shape, 1)) if unit else y]

    return tensor_module(args, names, build)
