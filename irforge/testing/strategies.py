"""Hypothesis strategies for random, valid programs, for numeric tests of passes (in irforge and in plugins):

    from hypothesis import given
    from irforge.testing import check_pipeline
    from irforge.testing.strategies import loop_programs, tensor_programs

    @given(tensor_programs())
    def test_my_pass_keeps_the_numbers(module):
        check_pipeline(module, "my-pass")      # the reference interpreter agrees before and after

`tensor_programs()` draws tensor-dialect programs (a random chain of elementwise ops, reductions, permutes,
broadcasts, reshapes, slices, selects, casts, gathers, params and constants on one or two float inputs);
`loop_programs()` draws loop-dialect programs (see its docstring). Shapes are small, so the interpreters are fast.
"""

from __future__ import annotations

from hypothesis import strategies as st

from irforge import index_expr as ix
from irforge.builtin import FuncOp, ModuleOp, ReturnOp
from irforge.dialects.loop import BufferOp, KernelOp
from irforge.dialects.loop.build import Builder
from irforge.dialects.loop.indexing import ValueDim
from irforge.dialects.tensor.builder import TensorBuilder
from irforge.index_expr import Dim
from irforge.scalar_ops import MONOIDS
from irforge.types import TensorType, bf16, f16, f32, tensor

FLOATS = (f32, f16, bf16)


@st.composite
def tensor_programs(draw, max_ops: int = 8, dtypes=FLOATS):
    """A module holding `func.func @forward` with 1-2 float inputs and a random chain of tensor ops."""
    dtype = draw(st.sampled_from(dtypes))
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    nargs = draw(st.integers(1, 2))
    func = FuncOp.build("forward", [TensorType(dtype, shape)] * nargs, [], arg_hints=["x", "y"][:nargs])
    module = ModuleOp()
    module.body.append(func)
    b = TensorBuilder(block=func.body)
    vals = list(func.body.args)
    for _ in range(draw(st.integers(1, max_ops))):
        x = draw(st.sampled_from(vals))
        s = x.type.shape
        kind = draw(st.sampled_from(["unary", "binary", "reduce", "permute", "broadcast", "reshape", "slice",
                                     "select", "cast", "gather", "param", "scalar", "folding"]))  # fmt: skip
        if kind == "unary":
            v = b.ew(draw(st.sampled_from(["exp", "tanh", "neg", "abs", "sigmoid", "sqrt", "erf"])), x)
        elif kind == "binary":
            others = [o for o in vals if o.type == x.type]
            v = b.ew(
                draw(st.sampled_from(["add", "mul", "sub", "maximum", "minimum"])), x, draw(st.sampled_from(others))
            )
        elif kind == "scalar":
            v = b.ew(draw(st.sampled_from(["add", "mul", "div"])), x, draw(st.sampled_from([0.5, 2.0, -1.25])))
        elif kind == "reduce":
            axes = draw(st.lists(st.integers(0, len(s) - 1), min_size=1, max_size=len(s), unique=True))
            v = b.reduce(draw(st.sampled_from(["add", "max", "min"])), x, axes)
        elif kind == "permute":
            v = b.permute(x, draw(st.permutations(range(len(s)))))
        elif kind == "broadcast":
            v = b.broadcast_to(x, (draw(st.integers(1, 3)), *s))
        elif kind == "reshape":
            n = 1
            for d in s:
                n *= d
            v = b.reshape(x, (n,)) if draw(st.booleans()) else b.reshape(x, (*s, 1))
        elif kind == "slice":
            ax = draw(st.integers(0, len(s) - 1))
            start = draw(st.integers(0, s[ax] - 1))
            step = draw(st.integers(1, 2))
            n = (s[ax] - start + step - 1) // step
            exprs = [Dim(i) if i != ax else Dim(i) * step + start for i in range(len(s))]
            v = b.index_map(x, (*s[:ax], n, *s[ax + 1 :]), exprs)
        elif kind == "select":
            v = b.select(b.ew("gt", x, 0.0), x, b.ew("neg", x))
        elif kind == "cast":
            v = b.cast(b.cast(x, draw(st.sampled_from(FLOATS))), x.type.dtype)
        elif kind == "folding":  # constants that fold to 1: x * (1.5 + -0.5), broadcast from a smaller shape
            one = b.ew("add", b.constant(1.5, x.type.dtype, s[1:]), b.constant(-0.5, x.type.dtype, s[1:]))
            v = b.ew("mul", x, b.broadcast_to(one, s))
        elif kind == "gather":
            ax = draw(st.integers(0, len(s) - 1))
            idx = b.ew("remainder", b.iota(0, (3,)), s[ax])
            exprs = [Dim(i) for i in range(len(s))]
            v = b.gather(x, idx, ax, (*s[:ax], 3, *s[ax + 1 :]), exprs[:ax] + exprs[ax + 1 :], [exprs[ax]])
        else:
            v = b.ew("mul", x, b.param(f"p{len(vals)}", x.type))
        vals.append(v)
    outs = draw(st.lists(st.sampled_from(vals[nargs:] or vals), min_size=1, max_size=2, unique=True))
    func.body.append(ReturnOp(outs))
    func.attributes["function_type"] = type(func.attributes["function_type"])(
        func.attributes["function_type"].inputs, tuple(v.type for v in outs)
    )
    return module


# ---- loop-level programs ----
UNARY = ("neg", "abs", "exp", "tanh", "sigmoid", "sin")
BINARY = ("add", "sub", "mul", "maximum", "minimum")


@st.composite
def shapes(draw, min_rank=0, max_rank=3, max_dim=4):
    rank = draw(st.integers(min_rank, max_rank))
    return tuple(draw(st.integers(1, max_dim)) for _ in range(rank))


@st.composite
def subscript(draw, ivs, size):
    """An index expression over loop indices `ivs` (list of (value, extent)) that stays inside 0..size-1."""
    kind = draw(st.sampled_from(["affine", "div", "min", "const"]))
    if kind == "const" or not ivs:
        return ix.Const(draw(st.integers(0, size - 1)))
    terms = [
        ValueDim(v) * draw(st.integers(1, 3)) for v, _ in draw(st.lists(st.sampled_from(ivs), min_size=1, max_size=2))
    ]
    e = terms[0]
    for t in terms[1:]:
        e = e + t
    e = e + draw(st.integers(0, 2))
    if kind == "div":
        e = e // draw(st.integers(1, 3))
    if kind == "min":
        return ix.minimum(e, size - 1)
    return e % size


@st.composite
def scalar_expr(draw, b: Builder, leaves, depth=2):
    """A scalar f32 value computed from `leaves` with random table ops."""
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from(leaves))
    if draw(st.booleans()):
        return b.scalar(draw(st.sampled_from(UNARY)), draw(scalar_expr(b, leaves, depth - 1)))
    lhs = draw(scalar_expr(b, leaves, depth - 1))
    rhs = draw(scalar_expr(b, leaves, depth - 1))
    if draw(st.integers(0, 4)) == 0:
        c = b.scalar("lt", lhs, rhs)
        return b.scalar("select", c, lhs, rhs)
    return b.scalar(draw(st.sampled_from(BINARY)), lhs, rhs)


@st.composite
def loads(draw, b: Builder, buffers, ivs, dtype=f32):
    out = []
    for buf in draw(st.lists(st.sampled_from(buffers), min_size=1, max_size=3)):
        v = b.load(buf, [draw(subscript(ivs, n)) for n in buf.type.shape])
        out.append(b.cast(v, dtype))
    return out


@st.composite
def kernel_body(draw, b: Builder, buffers, out, ivs):
    leaves = draw(loads(b, buffers, ivs))
    if draw(st.booleans()):
        monoid = draw(st.sampled_from(sorted(MONOIDS)))
        width = 2 if monoid == "online" else 1
        init = tuple(MONOIDS[monoid].identity(f32, i) for i in range(width))
        init = tuple(float(v) for v in init)
        if draw(st.integers(0, 3)) == 0 and monoid == "add":
            init = (float(draw(st.integers(-2, 2))),)
        extent = draw(st.integers(0, 4))
        red, riv, rb = b.reduce(extent, [(monoid, init)], [f32] * width, "r")
        inner = draw(loads(rb, buffers, [*ivs, (riv, extent)]))
        elem = draw(scalar_expr(rb, inner + leaves))
        if monoid == "mul":  # keep products of up to 4 terms tame
            elem = rb.scalar("tanh", elem)
        rb.yield_(*([elem, rb.const(1.0, f32)] if monoid == "online" else [elem]))
        leaves = [*leaves, *red.results]
    value = draw(scalar_expr(b, leaves))
    b.store(out, [ValueDim(v) for v, _ in ivs], b.cast(value, out.type.dtype))


@st.composite
def loop_programs(draw, max_kernels=3, dtypes=(f32,)):
    """A loop-level module: `func.func @forward` of one to three kernels over small random shapes, each free loops
    over its output dimensions, an optional reduction (any monoid, the online carrier included) whose body loads
    the inputs and earlier kernels' buffers through random affine / floordiv / mod / min subscripts (always in
    bounds), random scalar math, and a store. Every buffer is returned."""
    dtype = draw(st.sampled_from(dtypes))
    inputs = [tensor(dtype, *draw(shapes(min_rank=1))) for _ in range(draw(st.integers(1, 3)))]
    module = ModuleOp()
    outs = [tensor(dtype, *draw(shapes())) for _ in range(draw(st.integers(1, max_kernels)))]
    f = FuncOp.build("forward", inputs, outs, arg_hints=[f"x{i}" for i in range(len(inputs))])
    module.body.append(f)
    fb = Builder.at_end(f.body)
    readable = list(f.args)
    results = []
    for k, t in enumerate(outs):
        buf = fb.insert(BufferOp.build(t, f"t{k}")).result
        kernel = fb.insert(KernelOp.build(f"k{k}"))
        b, ivs = Builder.at_end(kernel.body), []
        for d, n in enumerate(t.shape):
            iv, b = b.for_(n, f"a{d}")
            ivs.append((iv, n))
        draw(kernel_body(b, readable, buf, ivs))
        readable.append(buf)
        results.append(buf)
    fb.insert(ReturnOp(results, [], {}))
    return module
