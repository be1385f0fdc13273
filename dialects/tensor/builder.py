"""Building tensor-dialect IR: what decompositions and tests use instead of spelling ops out.

    b = TensorBuilder(before=op, loc=NameLoc("aten.rms_norm", op.loc))
    sq = b.ew("mul", x, x)                       # elementwise, same shapes
    ms = b.mean(sq, axes=[2])                    # reduce(add) / n, axes kept as size 1
    y = b.ew("mul", x, b.ew("rsqrt", b.ew("add", ms, 1e-6)))   # broadcasts ms; 1e-6 becomes a constant

`ew` broadcasts its operands numpy-style (through explicit `tensor.index_map`s) and turns Python numbers into
constants of the other operands' element type, so the IR it builds always satisfies the dialect's verifier.
Index maps are simplified against the result's extents and identity maps are not built at all.
"""

from __future__ import annotations

from collections.abc import Sequence

from irforge import index_expr as ix
from irforge.attributes import SymbolRef
from irforge.index_expr import AffineMap, Dim, IndexExpr
from irforge.ir import Block, Operation, Value
from irforge.location import UNKNOWN, Location
from irforge.scalar_ops import SCALAR_OPS
from irforge.types import ScalarType, TensorType, boolean, f32, i64

from . import ConstantOp, ElementwiseOp, GatherOp, IndexMapOp, IotaOp, ParamOp, ReduceOp, ScatterOp


class ShapeError(ValueError):
    """Shapes the builder cannot combine (they do not broadcast): the caller's operands, not the builder's bug."""


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """numpy's broadcast of shapes; raises ShapeError when they do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0} - {1}
        if len(dims) > 1:
            raise ShapeError(f"shapes {', '.join(str(list(s)) for s in shapes)} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def reshape_exprs(in_shape: Sequence[int], out_shape: Sequence[int]) -> list[IndexExpr]:
    """Input coordinates of a row-major reshape, as expressions of the output coordinates (simplified)."""
    if 0 in in_shape:  # no elements, so no coordinates to compute (and no extent to divide by)
        return [ix.Const(0)] * len(in_shape)
    flat: IndexExpr = ix.Const(0)
    stride = 1
    for k in reversed(range(len(out_shape))):
        flat = ix.add(flat, ix.mul(Dim(k), stride))
        stride *= out_shape[k]
    exprs, stride = [], 1
    for n in reversed(in_shape):
        exprs.append(ix.mod(ix.floordiv(flat, stride), n) if n != 1 else ix.Const(0))
        stride *= n
    return [ix.simplify(e, out_shape) for e in reversed(exprs)]


class TensorBuilder:
    """Inserts tensor ops before `before` (or appends to `block`), each located at `loc`."""

    def __init__(self, before: Operation | None = None, loc: Location = UNKNOWN, *, block: Block | None = None):
        if (before is None) == (block is None):
            raise ValueError("TensorBuilder needs exactly one of `before` and `block`")
        self.before = before
        self.block = block
        self.loc = loc

    def insert(self, op: Operation) -> Value:
        if self.before is not None:
            self.before.parent.insert_before(self.before, op)
        else:
            self.block.append(op)
        return op.result

    # ---- leaves -------------------------------------------------------------------------------------------------
    def param(self, name: str, t: TensorType) -> Value:
        return self.insert(ParamOp([], [t], {"sym": SymbolRef(name)}, loc=self.loc))

    def constant(self, value, dtype: ScalarType, shape: Sequence[int] = ()) -> Value:
        if dtype == boolean:
            value = bool(value)
        elif dtype.is_int:
            value = int(value)
        else:
            value = float(value)
        return self.insert(ConstantOp([], [TensorType(dtype, tuple(shape))], {"value": value}, loc=self.loc))

    def iota(self, dim: int, shape: Sequence[int], dtype: ScalarType = i64) -> Value:
        return self.insert(IotaOp([], [TensorType(dtype, tuple(shape))], {"dim": dim}, loc=self.loc))

    # ---- elementwise --------------------------------------------------------------------------------------------
    def ew(self, name: str, *args, dtype: ScalarType | None = None) -> Value:
        """Scalar op `name` on tensors and Python numbers, broadcast; `dtype` is required for `cast` only."""
        tensors = [a for a in args if isinstance(a, Value)]
        if not tensors:
            raise ValueError(f"'{name}' needs at least one tensor operand")
        shape = broadcast_shapes(*(a.type.shape for a in tensors))
        like = _promote([a.type.dtype for a in tensors], name)
        vals = []
        for i, a in enumerate(args):
            if isinstance(a, Value):
                vals.append(self.broadcast_to(a, shape))
            else:
                # select's condition is bool; its branches and everything else take the tensors' type
                ct = boolean if (name == "select" and i == 0) else like
                vals.append(self.constant(a, ct, shape))
        if name == "cast":
            if dtype is None:
                raise ValueError("cast needs its target dtype")
            if vals[0].type.dtype == dtype:
                return vals[0]
            rt = dtype
        else:
            rt = SCALAR_OPS[name].result_type([v.type.dtype for v in vals])
        return self.insert(ElementwiseOp(vals, [TensorType(rt, shape)], {"op": name}, loc=self.loc))

    def cast(self, x: Value, dtype: ScalarType) -> Value:
        return self.ew("cast", x, dtype=dtype)

    def select(self, cond: Value, a, b) -> Value:
        return self.ew("select", cond, a, b)

    # ---- reductions ---------------------------------------------------------------------------------------------
    def reduce(self, kind: str, x: Value, axes: Sequence[int]) -> Value:
        """Reduce over `axes` (negative ones count from the end), keeping them as size 1."""
        t = x.type
        axes = tuple(sorted({a % t.rank for a in axes})) if t.rank else ()
        if not axes:
            return x
        shape = tuple(1 if i in axes else n for i, n in enumerate(t.shape))
        return self.insert(ReduceOp([x], [t.with_shape(shape)], {"kind": kind, "axes": axes}, loc=self.loc))

    def mean(self, x: Value, axes: Sequence[int]) -> Value:
        """Mean over `axes` in x's (float) type; callers wanting f32 accumulation cast first."""
        n = 1
        for a in {a % x.type.rank for a in axes}:
            n *= x.type.shape[a]
        return self.ew("div", self.reduce("add", x, axes), float(n))

    # ---- data movement ------------------------------------------------------------------------------------------
    def index_map(self, x: Value, shape: Sequence[int], exprs: Sequence[IndexExpr]) -> Value:
        """`result[d] = x[exprs(d)]` with `result` of `shape`; an identity map returns `x` itself."""
        shape = tuple(shape)
        m = ix.simplify_map(AffineMap(len(shape), tuple(ix.as_expr(e) for e in exprs)), shape)
        if shape == x.type.shape and is_identity(m, shape):
            return x
        return self.insert(IndexMapOp([x], [x.type.with_shape(shape)], {"map": m}, loc=self.loc))

    def broadcast_to(self, x: Value, shape: Sequence[int]) -> Value:
        """numpy broadcast: trailing dimensions align; size-1 and missing dimensions repeat."""
        shape = tuple(shape)
        src = x.type.shape
        if src == shape:
            return x
        if broadcast_shapes(src, shape) != shape:
            raise ShapeError(f"cannot broadcast {list(src)} to {list(shape)}")
        lead = len(shape) - len(src)
        exprs = [ix.Const(0) if n == 1 else Dim(lead + i) for i, n in enumerate(src)]
        return self.index_map(x, shape, exprs)

    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        return self.index_map(x, shape, reshape_exprs(x.type.shape, shape))

    def permute(self, x: Value, perm: Sequence[int]) -> Value:
        """`result` dimension i is `x` dimension perm[i] (torch.permute)."""
        src = x.type.shape
        inv = [0] * len(perm)
        for i, p in enumerate(perm):
            inv[p] = i
        return self.index_map(x, [src[p] for p in perm], [Dim(inv[k]) for k in range(len(src))])

    def drop_axes(self, x: Value, axes: Sequence[int]) -> Value:
        """Remove size-1 `axes` (the keepdim axes a reduction leaves)."""
        axes = {a % x.type.rank for a in axes}
        keep = [n for i, n in enumerate(x.type.shape) if i not in axes]
        return self.reshape(x, keep)

    def gather(self, x: Value, indices: Value, axis: int, shape, map_exprs, index_exprs) -> Value:
        """`result[d] = x[..., indices[index_exprs(d)], ...]` with the other coordinates `map_exprs(d)`."""
        shape = tuple(shape)
        attrs = {
            "axis": axis,
            "map": ix.simplify_map(AffineMap(len(shape), tuple(map(ix.as_expr, map_exprs))), shape),
            "index_map": ix.simplify_map(AffineMap(len(shape), tuple(map(ix.as_expr, index_exprs))), shape),
        }
        return self.insert(GatherOp([x, indices], [x.type.with_shape(shape)], attrs, loc=self.loc))

    def scatter(self, base: Value, indices: Value, updates: Value, axis: int) -> Value:
        """`base` with `updates[..., k, ...]` written at `base[..., indices[k], ...]` along `axis`."""
        return self.insert(ScatterOp([base, indices, updates], [base.type], {"axis": axis}, loc=self.loc))


def is_identity(m: AffineMap, shape: Sequence[int]) -> bool:
    """Whether `m` reads every coordinate of `shape` where it is (a size-1 dimension may read coordinate 0)."""
    return len(m.results) == len(shape) == m.num_dims and all(
        e == Dim(i) or (shape[i] == 1 and e == ix.Const(0)) for i, e in enumerate(m.results)
    )


def accumulator_type(dtype: ScalarType) -> ScalarType:
    """The type PyTorch accumulates `dtype` in: f32 for half types, the type itself otherwise."""
    return f32 if dtype.name in ("f16", "bf16") else dtype


def _promote(dtypes: list[ScalarType], name: str) -> ScalarType:
    """The type Python-number operands take: that of the tensor operands (select: of its branches)."""
    if name == "select" and len(dtypes) > 1:
        return dtypes[1] if dtypes[0] == boolean else dtypes[0]
    return dtypes[0]
