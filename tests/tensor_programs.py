"""Hypothesis strategies for random, valid tensor-dialect programs (built with `TensorBuilder`)."""

from __future__ import annotations

from hypothesis import strategies as st
from irforge.dialects.tensor.builder import TensorBuilder

from irforge.builtin import FuncOp, ModuleOp, ReturnOp
from irforge.index_expr import Dim
from irforge.types import TensorType, bf16, f16, f32

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
