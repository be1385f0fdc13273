"""Build kernel-level IR from Python: what the tile -> kernel pass (and tests) use instead of writing text.

    kb = KernelBuilder.kernel("k_add", [PtrType(f32)] * 3, grid=4, block=256, names=["a", "b", "c"])
    a, b, c = kb.args
    t, blk = kb.thread_id("x", "t"), kb.block_id("x", "blk")
    i = kb.index(Val(blk) * 1024 + Val(t) * 4, "i")
    s = kb.scalar("add", kb.load(a, [Val(i)], tensor(f32, 4)), kb.load(b, [Val(i)], tensor(f32, 4)))
    kb.store(s, c, [Val(i)])
    with kb.for_(0, Val(n), step=256, carries=[acc0]) as loop:   # loop.iv, loop.carries; loop.yield_(...)
        ...
    kernel_op = kb.op

Index expressions are `irforge.index_expr` expressions over `Val(value)` leaves (and ints); every op that takes
them gets its index operands and AffineMap attributes from `bind_values`.
"""

from __future__ import annotations

from contextlib import contextmanager

from irforge.attributes import UNIT
from irforge.index_expr import IndexExpr
from irforge.ir import Block, Operation, Region, Value
from irforge.location import UNKNOWN, Location
from irforge.scalar_ops import MONOIDS
from irforge.types import TensorType, boolean, index

from . import cluster as CL
from . import dependent_launch as DL
from . import ops as K
from . import warpgroup as WG
from .ops import Val, bind_values


class _Loop:
    def __init__(self, op: K.ForOp, builder: KernelBuilder):
        self.op = op
        self.iv = op.induction_var
        self.carries = list(op.carries)
        self.results = list(op.results)
        self._b = builder

    def yield_(self, *values: Value) -> None:
        self._b._add(K.YieldOp(list(values), ()))


class _If:
    def __init__(self, op: K.IfOp, builder: KernelBuilder):
        self.op = op
        self.results = list(op.results)
        self._b = builder

    @contextmanager
    def then(self):
        with self._b.at(self.op.regions[0].block):
            yield

    @contextmanager
    def otherwise(self):
        with self._b.at(self.op.regions[1].block):
            yield

    def yield_(self, *values: Value) -> None:
        self._b._add(K.YieldOp(list(values), ()))


class KernelBuilder:
    """Appends kernel ops at an insertion block; every method returns the new op's result (or the op)."""

    def __init__(self, block: Block, loc: Location = UNKNOWN):
        self.block = block
        self.loc = loc

    @staticmethod
    def kernel(name: str, param_types, grid, block, names=None, loc: Location = UNKNOWN) -> KernelBuilder:
        op = K.KernelFuncOp.build(name, param_types, grid, block, arg_hints=names, loc=loc)
        kb = KernelBuilder(op.body, loc)
        kb.op = op
        return kb

    @property
    def args(self) -> list[Value]:
        return list(self.op.body.args)

    @contextmanager
    def at(self, block: Block):
        saved = self.block
        self.block = block
        try:
            yield
        finally:
            self.block = saved

    def _add(self, op: Operation, hint: str | None = None):
        op.loc = self.loc if op.loc is UNKNOWN else op.loc
        if hint is not None and op.results:
            op.results[0].name_hint = hint
        self.block.append(op)
        return op.results[0] if len(op.results) == 1 else op

    # ---- geometry and indices ---------------------------------------------------------------------------------
    def thread_id(self, dim: str = "x", hint: str | None = None) -> Value:
        return self._add(K.ThreadIdOp((), [index], {"dim": dim}), hint)

    def block_id(self, dim: str = "x", hint: str | None = None) -> Value:
        return self._add(K.BlockIdOp((), [index], {"dim": dim}), hint)

    def lane_id(self, hint: str | None = None) -> Value:
        return self._add(K.LaneIdOp((), [index]), hint)

    def warp_id(self, hint: str | None = None) -> Value:
        return self._add(K.WarpIdOp((), [index]), hint)

    def index(self, expr: IndexExpr | int, hint: str | None = None) -> Value:
        (m,), vals = bind_values([[expr]])
        return self._add(K.IndexOp(vals, [index], {"expr": m}), hint)

    # ---- values -----------------------------------------------------------------------------------------------
    def const(self, value, t, hint: str | None = None) -> Value:
        return self._add(K.ConstOp((), [t], {"value": value}), hint)

    def scalar(self, name: str, *args: Value, hint: str | None = None) -> Value:
        cls = next(c for c in K.SCALAR_MATH_OPS if c.scalar_op == name)
        rt = K.elementwise_result_type(name, [a.type for a in args])
        return self._add(cls(list(args), [rt]), hint)

    def cast(self, v: Value, t, hint: str | None = None) -> Value:
        return self._add(K.CastOp([v], [t]), hint)

    def splat(self, v: Value, t: TensorType, hint: str | None = None) -> Value:
        return self._add(K.SplatOp([v], [t]), hint)

    def extract(self, tile: Value, position, hint: str | None = None) -> Value:
        from .types import element_type

        return self._add(K.ExtractOp([tile], [element_type(tile.type)], {"position": tuple(position)}), hint)

    def insert(self, element: Value, tile: Value, position, hint: str | None = None) -> Value:
        return self._add(K.InsertOp([element, tile], [tile.type], {"position": tuple(position)}), hint)

    def reduce(self, kind: str, tile: Value, axes=None, init: Value | None = None, hint: str | None = None) -> Value:
        t = tile.type
        attrs = {"kind": kind, "axes": tuple(axes) if axes is not None else tuple(range(t.rank))}
        operands = [tile] if init is None else [tile, init]
        return self._add(K.ReduceOp(operands, K.ReduceOp.infer_result_types([t], attrs), attrs), hint)

    def reshape(self, tile: Value, t: TensorType, hint: str | None = None) -> Value:
        return self._add(K.ReshapeOp([tile], [t]), hint)

    # ---- monoid carriers ----------------------------------------------------------------------------------------
    def combine(self, monoid: str, a: list[Value], b: list[Value]) -> list[Value]:
        """The combine of two carriers of `monoid` (one value for add/max/..., (max, sums...) for online), as
        scalar ops: the straight-line program `irforge.scalar_ops` defines, so every level combines alike."""
        steps, outputs = MONOIDS[monoid].combine_program(len(a))
        env = {f"a{i}": v for i, v in enumerate(a)} | {f"b{i}": v for i, v in enumerate(b)}
        for st in steps:
            named = [env[x] for x in st.args if isinstance(x, str)]
            ctype = next((v.type for v in named if v.type != boolean), a[0].type)
            args = [env[x] if isinstance(x, str) else self.const(float(x), ctype) for x in st.args]
            env[st.result] = self.scalar(st.op, *args)
        return [env[o] for o in outputs]

    def warp_allreduce(self, monoid: str, carrier: list[Value], width: int = 32) -> list[Value]:
        """Combine a carrier across `width` lanes with a butterfly of shuffles: every lane ends with the result."""
        off = width // 2
        while off >= 1:
            other = [self.shfl("xor", v, off, width if width < 32 else None) for v in carrier]
            carrier = self.combine(monoid, carrier, other)
            off //= 2
        return carrier

    # ---- control flow -----------------------------------------------------------------------------------------
    @contextmanager
    def for_(self, lower, upper, step: int = 1, carries=(), hint: str = "i", unroll: int | None = None):
        (lo, hi), vals = bind_values([[lower], [upper]])
        types = [c.type for c in carries]
        body = Block([index, *types], [hint, *(c.name_hint for c in carries)])
        attrs = {"lower": lo, "upper": hi, "step": step}
        if unroll is not None:
            attrs["unroll"] = unroll
        op = K.ForOp([*vals, *carries], types, attrs, [Region([body])], self.loc)
        self.block.append(op)
        with self.at(body):
            yield _Loop(op, self)

    @contextmanager
    def if_(self, cond: Value, result_types=(), single_writer=()):
        attrs = {"single_writer": tuple(single_writer)} if single_writer else {}
        op = K.IfOp([cond], list(result_types), attrs, [Region([Block()]), Region([Block()])], self.loc)
        self.block.append(op)
        yield _If(op, self)

    # ---- memory and synchronisation ---------------------------------------------------------------------------
    def smem(self, t, dynamic: bool = False, hint: str | None = None) -> Value:
        return self._add(K.SmemOp((), [t], {"dynamic": UNIT} if dynamic else {}), hint)

    def _indexed(self, cls, fixed, groups: dict, result_types=(), attrs=None, hint=None):
        maps, vals = bind_values(list(groups.values()))
        a = dict(zip(groups, maps)) | dict(attrs or {})
        return self._add(cls([*fixed, *vals], list(result_types), a), hint)

    def load(self, mem: Value, idx, t, hint: str | None = None, strides=None) -> Value:
        attrs = {"strides": tuple(strides)} if strides is not None else {}
        return self._indexed(K.LoadOp, [mem], {"index": list(idx)}, [t], attrs, hint)

    def store(self, value: Value, mem: Value, idx, strides=None) -> Operation:
        attrs = {"strides": tuple(strides)} if strides is not None else {}
        return self._indexed(K.StoreOp, [value, mem], {"index": list(idx)}, attrs=attrs)

    def atomic(self, kind: str, value: Value, mem: Value, idx, strides=None) -> Operation:
        attrs = {"kind": kind} | ({"strides": tuple(strides)} if strides is not None else {})
        return self._indexed(K.AtomicOp, [value, mem], {"index": list(idx)}, attrs=attrs)

    def barrier(self) -> Operation:
        return self._add(K.BarrierOp((), ()))

    def fence_proxy_async(self) -> Operation:
        return self._add(K.FenceProxyAsyncOp((), ()))

    def shfl(self, mode: str, value: Value, lane, width: int | None = None, hint: str | None = None) -> Value:
        cls = {"xor": K.ShflXorOp, "down": K.ShflDownOp, "up": K.ShflUpOp, "idx": K.ShflIdxOp}[mode]
        attrs = {"width": width} if width is not None else {}
        return self._indexed(cls, [value], {"lane": [lane]}, [value.type], attrs, hint)

    # ---- async copies, mbarriers, TMA, tensor cores -----------------------------------------------------------
    def cp_async(self, src: Value, src_idx, dst: Value, dst_idx, chunk: TensorType) -> Operation:
        groups = {"src_index": list(src_idx), "dst_index": list(dst_idx)}
        return self._indexed(K.CpAsyncOp, [src, dst], groups, attrs={"chunk": chunk})

    def cp_async_commit(self) -> Operation:
        return self._add(K.CpAsyncCommitOp((), ()))

    def cp_async_wait(self, pending: int) -> Operation:
        return self._add(K.CpAsyncWaitOp((), (), {"pending": pending}))

    def mbarrier_init(self, bar: Value, i, count: int) -> Operation:
        return self._indexed(K.MbarrierInitOp, [bar], {"index": [i]}, attrs={"count": count})

    def mbarrier_arrive(self, bar: Value, i, expect_tx: int | None = None) -> Operation:
        attrs = {"expect_tx": expect_tx} if expect_tx is not None else {}
        return self._indexed(K.MbarrierArriveOp, [bar], {"index": [i]}, attrs=attrs)

    def mbarrier_wait(self, bar: Value, i, parity) -> Operation:
        return self._indexed(K.MbarrierWaitOp, [bar], {"index": [i], "parity": [parity]})

    def tma_load(self, tmap: Value, coords, dst: Value, dst_idx, bar: Value, bar_idx) -> Operation:
        groups = {"coords": list(coords), "dst_index": list(dst_idx), "bar_index": [bar_idx]}
        return self._indexed(K.TmaLoadOp, [tmap, dst, bar], groups)

    def frag_load(self, mem: Value, idx, t, stride=None, transpose=False, hint=None, rows_dim=-2, rows=0) -> Value:
        attrs = ({"stride": stride} if stride is not None else {}) | ({"transpose": UNIT} if transpose else {})
        attrs |= ({"rows_dim": rows_dim} if rows_dim != -2 else {}) | ({"rows": rows} if rows else {})
        return self._indexed(K.FragLoadOp, [mem], {"index": list(idx)}, [t], attrs, hint)

    def frag_store(self, frag: Value, mem: Value, idx, stride: int | None = None, transpose=False) -> Operation:
        attrs = ({"stride": stride} if stride is not None else {}) | ({"transpose": UNIT} if transpose else {})
        return self._indexed(K.FragStoreOp, [frag, mem], {"index": list(idx)}, attrs=attrs)

    def ldmatrix(self, mem: Value, idx, t, transpose=False, hint=None, rows_dim=-2, rows=0) -> Value:
        attrs = ({"transpose": UNIT} if transpose else {}) | ({"rows_dim": rows_dim} if rows_dim != -2 else {})
        attrs |= {"rows": rows} if rows else {}
        return self._indexed(K.LdmatrixOp, [mem], {"index": list(idx)}, [t], attrs, hint)

    def mma(self, a: Value, b: Value, c: Value, hint: str | None = None) -> Value:
        return self._add(K.MmaOp([a, b, c], [c.type]), hint)

    def wgmma(
        self, a: Value, a_idx, b: Value, b_idx, c: Value, hint: str | None = None, transpose_b: bool = False
    ) -> Value:
        """`a_idx` is empty for A in registers; `transpose_b`: B stored [16, N] (MN-major)."""
        groups = {"index_a": list(a_idx), "index_b": list(b_idx)}
        attrs = {"transpose": UNIT} if transpose_b else {}
        return self._indexed(WG.WgmmaOp, [a, b, c], groups, [c.type], attrs=attrs, hint=hint)

    def wgmma_fence(self) -> Operation:
        return self._add(WG.WgmmaFenceOp((), ()))

    def wgmma_commit(self) -> Operation:
        return self._add(WG.WgmmaCommitOp((), ()))

    def wgmma_wait(self, pending: int) -> Operation:
        return self._add(WG.WgmmaWaitOp((), (), {"pending": pending}))

    def setmaxnreg(self, action: str, count: int) -> Operation:
        return self._add(WG.SetMaxRegistersOp((), (), {"action": action, "count": count}))

    # ---- programmatic dependent launch ------------------------------------------------------------------------
    def griddepcontrol_wait(self) -> Operation:
        return self._add(DL.GridDepWaitOp((), ()))

    def griddepcontrol_launch_dependents(self) -> Operation:
        return self._add(DL.GridDepLaunchDependentsOp((), ()))

    def prefetch_l2(self, mem: Value, i, nbytes) -> Operation:
        return self._indexed(DL.PrefetchL2Op, [mem], {"index": [i], "bytes": [nbytes]})

    def cluster_barrier(self) -> Operation:
        return self._add(CL.ClusterBarrierOp((), ()))

    def store_async(self, value: Value, mem: Value, idx, bar: Value, bar_i, rank) -> Operation:
        groups = {"index": list(idx), "bar_index": [bar_i], "rank": [rank]}
        return self._indexed(CL.StoreAsyncOp, [value, mem, bar], groups)

    def cluster_map(self, mem: Value, rank, hint: str | None = None) -> Value:
        return self._indexed(CL.ClusterMapOp, [mem], {"rank": [rank]}, [mem.type], hint=hint)


__all__ = ["KernelBuilder", "Val"]
