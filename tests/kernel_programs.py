"""Hypothesis strategies for kernel-level IR: random well-formed kernels (every op family, nested loops and ifs,
register tiles, fragments, index expressions), built through `KernelBuilder` so the builder is exercised too."""

from __future__ import annotations

from hypothesis import strategies as st
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel.builder import KernelBuilder, Val
from irforge.dialects.kernel.types import FragType, MbarrierType, PtrType, SmemType, TensorMapType

from irforge import index_expr as ix
from irforge.attributes import SymbolRef
from irforge.builtin import FuncOp, ModuleOp, ReturnOp
from irforge.scalar_ops import SCALAR_OPS
from irforge.types import ScalarType, boolean, index, tensor

f32, bf16, i32 = ScalarType("f32"), ScalarType("bf16"), ScalarType("i32")
ACC = FragType("acc", f32, (16, 8))
FA = FragType("a", bf16, (16, 16))
FB = FragType("b", bf16, (16, 8))


@st.composite
def index_exprs(draw, values, depth: int = 2):
    """An index expression over `values` (index SSA values) and small constants."""
    if depth == 0 or draw(st.booleans()):
        if values and draw(st.booleans()):
            return Val(draw(st.sampled_from(values)))
        return ix.Const(draw(st.integers(0, 64)))
    a = draw(index_exprs(values, depth - 1))
    kind = draw(st.sampled_from(["add", "sub", "mul", "floordiv", "mod", "ceildiv", "min", "max"]))
    if kind in ("floordiv", "mod", "ceildiv"):
        return {"floordiv": ix.FloorDiv, "mod": ix.Mod, "ceildiv": ix.CeilDiv}[kind](
            a, ix.Const(draw(st.integers(1, 8)))
        )
    b = draw(index_exprs(values, depth - 1))
    return {"add": ix.Add, "sub": ix.Sub, "mul": ix.Mul, "min": ix.Min, "max": ix.Max}[kind](a, b)


class _Pools:
    """Values available at the current point, by type."""

    def __init__(self, parent=None):
        self.by_type: dict = {} if parent is None else {k: list(v) for k, v in parent.by_type.items()}

    def add(self, v):
        self.by_type.setdefault(v.type, []).append(v)

    def of(self, t):
        return self.by_type.get(t, [])


_ARITH = [n for n, o in SCALAR_OPS.items() if o.kind == "arith" and o.arity == 2]
_MATH1 = [n for n, o in SCALAR_OPS.items() if o.kind == "math" and o.arity == 1]


@st.composite
def _statement(draw, kb: KernelBuilder, pools: _Pools, mems: dict, depth: int):
    idx = pools.of(index)
    kind = draw(
        st.sampled_from(
            [
                "index",
                "const",
                "arith",
                "math",
                "compare",
                "select",
                "cast",
                "tile",
                "load",
                "store",
                "shfl",
                "barrier",
                "for",
                "if",
                "async",
                "frag",
                "atomic",
            ]
        )
    )
    hint = draw(st.sampled_from([None, "v", "acc", "x.y", "tmp"]))
    if kind == "index":
        pools.add(kb.index(draw(index_exprs(idx)), hint))
    elif kind == "const":
        t = draw(st.sampled_from([f32, bf16, i32, index, boolean, tensor(f32, 4)]))
        value = {
            "f32": draw(st.floats(allow_nan=True, width=32)),
            "bf16": 0.5,
            "i32": draw(st.integers(-5, 5)),
            "index": 3,
            "bool": draw(st.booleans()),
        }.get(t.name if isinstance(t, ScalarType) else "f32", 1.0)
        pools.add(kb.const(value, t, hint))
    elif kind == "arith":
        t = draw(st.sampled_from([f32, bf16, i32, index, tensor(f32, 4)]))
        vals = pools.of(t)
        if vals:
            pools.add(
                kb.scalar(
                    draw(st.sampled_from(_ARITH)), draw(st.sampled_from(vals)), draw(st.sampled_from(vals)), hint=hint
                )
            )
    elif kind == "math":
        t = draw(st.sampled_from([f32, bf16, tensor(f32, 4)]))
        if pools.of(t):
            pools.add(kb.scalar(draw(st.sampled_from(_MATH1)), draw(st.sampled_from(pools.of(t))), hint=hint))
    elif kind == "compare":
        t = draw(st.sampled_from([f32, index]))
        if pools.of(t):
            a, b = (draw(st.sampled_from(pools.of(t))) for _ in range(2))
            pools.add(kb.scalar(draw(st.sampled_from(["lt", "le", "eq", "ne", "gt", "ge"])), a, b, hint=hint))
    elif kind == "select":
        if pools.of(boolean) and pools.of(f32):
            c = draw(st.sampled_from(pools.of(boolean)))
            a, b = (draw(st.sampled_from(pools.of(f32))) for _ in range(2))
            pools.add(kb.scalar("select", c, a, b, hint=hint))
    elif kind == "cast":
        src = draw(st.sampled_from([f32, bf16, i32, index]))
        if pools.of(src):
            pools.add(kb.cast(draw(st.sampled_from(pools.of(src))), draw(st.sampled_from([f32, bf16, i32, index]))))
    elif kind == "tile":
        if pools.of(f32):
            s = kb.splat(draw(st.sampled_from(pools.of(f32))), tensor(f32, 4))
            pools.add(s)
            pools.add(kb.extract(s, [draw(st.integers(0, 3))]))
            pools.add(kb.insert(draw(st.sampled_from(pools.of(f32))), s, [1]))
            pools.add(kb.reduce(draw(st.sampled_from(["add", "max", "min", "mul"])), s))
            t2 = kb.splat(draw(st.sampled_from(pools.of(f32))), tensor(f32, 2, 4))
            pools.add(kb.reduce("add", t2, axes=[1]))
    elif kind == "load":
        mem = draw(st.sampled_from([m for m, t in mems.items() if isinstance(t, (PtrType, SmemType))]))
        t = mems[mem]
        rank = len(t.shape) if isinstance(t, SmemType) else 1
        exprs = [draw(index_exprs(idx)) for _ in range(rank)]
        rt = draw(st.sampled_from([t.dtype, tensor(t.dtype.name, 4)] if t.dtype == f32 else [t.dtype]))
        pools.add(kb.load(mem, exprs, rt, hint))
    elif kind == "store":
        mem = draw(st.sampled_from([m for m, t in mems.items() if isinstance(t, (PtrType, SmemType))]))
        t = mems[mem]
        if pools.of(t.dtype):
            rank = len(t.shape) if isinstance(t, SmemType) else 1
            kb.store(draw(st.sampled_from(pools.of(t.dtype))), mem, [draw(index_exprs(idx)) for _ in range(rank)])
    elif kind == "atomic":
        ptrs = [m for m, t in mems.items() if isinstance(t, PtrType) and t.dtype == f32]
        if ptrs and pools.of(f32):
            kb.atomic(
                draw(st.sampled_from(["add", "max", "min"])),
                draw(st.sampled_from(pools.of(f32))),
                draw(st.sampled_from(ptrs)),
                [draw(index_exprs(idx))],
            )
    elif kind == "shfl":
        t = draw(st.sampled_from([f32, tensor(f32, 4)]))
        if pools.of(t):
            mode = draw(st.sampled_from(["xor", "down", "up", "idx"]))
            width = draw(st.sampled_from([None, 8, 32]))
            pools.add(kb.shfl(mode, draw(st.sampled_from(pools.of(t))), draw(index_exprs(idx, 1)), width, hint))
    elif kind == "barrier":
        draw(st.sampled_from([kb.barrier, kb.fence_proxy_async]))()
    elif kind == "async":
        smem = next(m for m, t in mems.items() if isinstance(t, SmemType) and t.dtype == f32)
        ptr = next(m for m, t in mems.items() if isinstance(t, PtrType) and t.dtype == f32)
        bars = next(m for m, t in mems.items() if isinstance(t, MbarrierType))
        kb.cp_async(ptr, [draw(index_exprs(idx))], smem, [draw(index_exprs(idx)), 0], tensor(f32, 4))
        kb.cp_async_commit()
        kb.cp_async_wait(draw(st.integers(0, 3)))
        kb.mbarrier_init(bars, 0, 1)
        kb.mbarrier_arrive(bars, draw(index_exprs(idx, 1)), draw(st.sampled_from([None, 1024])))
        kb.mbarrier_wait(bars, 0, draw(index_exprs(idx, 1)))
        tmap = next(m for m, t in mems.items() if isinstance(t, TensorMapType))
        tile = next(m for m, t in mems.items() if isinstance(t, SmemType) and t.dtype == bf16 and not t.swizzle)
        kb.tma_load(tmap, [draw(index_exprs(idx)), draw(index_exprs(idx))], tile, [], bars, 1)
    elif kind == "frag":
        tile = draw(st.sampled_from([m for m, t in mems.items() if isinstance(t, SmemType) and t.dtype == bf16]))
        a = kb.frag_load(tile, [0, draw(index_exprs(idx, 1))], FA, hint="fa")
        b = kb.frag_load(tile, [0, 0], FB, transpose=draw(st.booleans()), hint="fb")
        c = kb.const(0.0, ACC)
        d = kb.mma(a, b, c, hint="d")
        pools.add(kb.scalar("mul", d, d))
        out = next(m for m, t in mems.items() if isinstance(t, PtrType) and t.dtype == f32)
        kb.frag_store(d, out, [draw(index_exprs(idx))], stride=64)
    elif kind == "for" and depth < 2:
        carry_t = draw(st.sampled_from([f32, tensor(f32, 4), ACC]))
        inits = [v for v in pools.of(carry_t)[:1]]
        lo, hi = draw(index_exprs(idx, 1)), draw(index_exprs(idx, 1))
        with kb.for_(
            lo, hi, step=draw(st.integers(1, 4)), carries=inits, hint="i", unroll=draw(st.sampled_from([None, 0, 2]))
        ) as loop:
            inner = _Pools(pools)
            inner.add(loop.iv)
            for c in loop.carries:
                inner.add(c)
            for _ in range(draw(st.integers(0, 3))):
                draw(_statement(kb, inner, mems, depth + 1))
            if loop.carries:
                loop.yield_(draw(st.sampled_from(inner.of(carry_t))))
        for r in loop.results:
            pools.add(r)
    elif kind == "if" and depth < 2 and pools.of(boolean):
        with_result = draw(st.booleans()) and pools.of(f32)
        with kb.if_(draw(st.sampled_from(pools.of(boolean))), [f32] if with_result else []) as br:
            for region, has_else in ((br.then, True), (br.otherwise, draw(st.booleans()) or with_result)):
                if not has_else:
                    continue
                with region():
                    inner = _Pools(pools)
                    for _ in range(draw(st.integers(0, 2))):
                        draw(_statement(kb, inner, mems, depth + 1))
                    if with_result:
                        br.yield_(draw(st.sampled_from(inner.of(f32))))
        for r in br.results:
            pools.add(r)


@st.composite
def kernel_modules(draw):
    """A module with one random kernel.func and a host function launching it."""
    params = [PtrType(f32), PtrType(bf16), TensorMapType(bf16, (64, 64), (16, 16))]
    grid = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    block = draw(st.sampled_from([(32,), (64,), (32, 2), (2, 32, 2)]))
    kb = KernelBuilder.kernel("k_random", params, grid, block, names=["x", "y", "xm"])
    x, y, xm = kb.args
    smem = kb.smem(SmemType(f32, (2, 64)), dynamic=draw(st.booleans()), hint="buf")
    tile = kb.smem(SmemType(bf16, (16, 16)), hint="tile")
    swizzled = kb.smem(SmemType(bf16, (16, 64), (2, 3, 3)), hint="swz")
    bars = kb.smem(MbarrierType(2), hint="bars")
    mems = {v: v.type for v in (x, y, xm, smem, tile, swizzled, bars)}
    pools = _Pools()
    pools.add(kb.thread_id(draw(st.sampled_from(["x", "y"])), "t"))
    pools.add(kb.block_id("x", "b"))
    pools.add(kb.lane_id("lane"))
    pools.add(kb.warp_id("warp"))
    pools.add(kb.const(1.5, f32, "c"))
    pools.add(kb.const(True, boolean, "flag"))
    for _ in range(draw(st.integers(1, 10))):
        draw(_statement(kb, pools, mems, 0))
    module = ModuleOp()
    module.body.append(kb.op)
    host = FuncOp.build("forward", [tensor("f32", 64), tensor("bf16", 64, 64)], [tensor("f32", 64)], ["a", "m"])
    a, m = host.body.args
    hb = KernelBuilder(host.body)
    w = hb._add(K.ParamOp((), [tensor("bf16", 64)], {"sym": SymbolRef("w.0")}))
    out = hb._add(K.AllocOp((), [tensor("f32", 64)]), "out")
    view = hb._add(K.ViewOp([m], [tensor("bf16", 64, 64)]), "mv")
    hb._add(K.LaunchOp([out, w, view], (), {"callee": SymbolRef("k_random")}))
    host.body.append(ReturnOp([a], ()))
    module.body.append(host)
    return module
