"""tile -> kernel: materialize each kernel's schedule with hardware primitives, one path for every kernel kind.

A `tile.kernel` becomes a `kernel.func` (one `!kernel.ptr` parameter per buffer it reads, then per buffer it
writes) and a `kernel.launch` in its place; `tile.buffer` and `tile.param` become `kernel.alloc` and
`kernel.param`. Inside, by construct:

- a loop distributed `by` axes: its unit `u` from the hardware indices, then `for (w = u; w < W; w += P)` over
  work items (just `w = u` when P = W, a guard when P > W); when P divides W every thread makes W / P trips, and
  the loop counts them, `for (k = 0; k < W / P; ++k) w = k * P + u`, unrolled, so a thread's loads of all its
  trips are in flight at once instead of one after another; a loop without `by`: `for (w = 0; w < W; ++w)`; the
  loop indices are delinearized from `w * vector`;
- `vector V`: values that depend on the innermost index become register tiles `T[V]` (16-byte loads and stores),
  values that do not stay scalars (the kernel dialect broadcasts them);
- `tile.reduce`: a `kernel.for` carrying the carriers; each iteration folds its element (a register tile is first
  folded in the thread) with the monoid's `combine_program`, so every monoid, the online carrier included, takes
  the same path;
- `tile.combine` over threadIdx.x: a `shfl_xor` ladder within the warp (its `width` for groups under 32 threads),
  then, past 32 threads, each warp's carrier through shared memory and a barrier, folded by every thread (blocks
  that are not whole warps go through shared memory directly: shuffles need all 32 lanes);
- `tile.stage`: a shared-memory buffer filled cooperatively by the block's threads in vectors, then a barrier
  (and one before it inside a loop, so the previous trip's readers are done);
- `tile.store`: guarded by the single-writer rule (index 0 along every launch axis no enclosing loop uses).
"""

from __future__ import annotations

import math
from contextlib import contextmanager

from irforge.dialects import tile as T
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel.builder import KernelBuilder, Val
from irforge.dialects.kernel.types import PtrType, SmemType
from irforge.dialects.loop.indexing import ValueDim
from irforge.dialects.scalar import CastOp, ConstOp, ScalarMathOp
from irforge.dialects.tile.vectors import why_not

from irforge import index_expr as ix
from irforge.attributes import SymbolRef
from irforge.builtin import FuncOp
from irforge.ir import Operation, Value
from irforge.pass_manager import Pass
from irforge.types import TensorType, boolean, index

_HW_HINTS = {"threadIdx.x": "tx", "threadIdx.y": "ty", "threadIdx.z": "tz"}
_HW_HINTS |= {"blockIdx.x": "bx", "blockIdx.y": "by", "blockIdx.z": "bz"}
_INDEX_LIMIT = 2**31 - 1
FULL_UNROLL = 8  # uniform strided loops of up to this many trips unroll fully, longer ones by UNROLL
UNROLL = 4


class LowerToKernel(Pass):
    """Materialize each tile kernel's schedule as a kernel.func launched from the host function."""

    name = "lower-to-kernel"
    input_level = "tile"
    output_level = "kernel"

    def check(self, op: Operation) -> tuple[Operation, str] | None:
        for k in _tile_kernels(op):
            found = unmaterializable(k)
            if found is not None:
                return found[0], f"cannot be materialized: {found[1]}"
        return None

    def run(self, op: Operation) -> None:
        for func in [f for f in op.body.ops if isinstance(f, FuncOp)]:
            _materialize_function(func, op)


def _tile_kernels(module: Operation) -> list[T.KernelOp]:
    return [k for k in module.walk() if isinstance(k, T.KernelOp)]


def unmaterializable(kernel: T.KernelOp) -> tuple[Operation, str] | None:
    """The first op of `kernel` this pass cannot materialize, and why (None when it can do them all)."""
    bx = kernel.axis_size("threadIdx.x")
    for op in kernel.walk():
        if isinstance(op, T.CombineOp):
            if op.over != ("threadIdx.x",):
                return op, f"combines over {', '.join(op.over)}; only combines over threadIdx.x are materialized yet"
            if bx & (bx - 1):
                return op, f"combines over {bx} threads along threadIdx.x; the shuffle ladder needs a power of two"
        if isinstance(op, (T.CombineOp, T.StageOp)):
            for lp in T.enclosing_loops(op):
                if any(a in T.THREAD_AXES for a in lp.bind) and lp.work_items % lp.units(kernel):
                    return op, (
                        f"needs its block's threads together, but it sits in a loop distributed over "
                        f"{', '.join(lp.bind)} whose {lp.work_items} work items do not split evenly over "
                        f"{lp.units(kernel)} units"
                    )
        if isinstance(op, T.StageOp) and not op.box:
            return op, "stages a rank-0 buffer; load it directly"
        if isinstance(op, T.LoopOp) and op.vector > 1:
            inner = next((x for x in op.body.ops if any(isinstance(y, T.LoopOp) for y in x.walk())), None)
            if inner is not None:
                return op, "is vectorized but holds loops; vector lanes through inner loops come with register tiling"
            why = why_not(op, op.vector)
            if why:
                return op, f"is vectorized by {op.vector}, but {why}"
    return None


def _materialize_function(func: FuncOp, module: Operation) -> None:
    for op in list(func.body.ops):
        hints = [r.name_hint for r in op.results]
        if isinstance(op, T.ParamOp):
            new = K.ParamOp((), [op.result.type], {"sym": op.attributes["sym"]}, loc=op.loc, result_hints=hints)
        elif isinstance(op, T.BufferOp):
            new = K.AllocOp((), [op.result.type], {}, loc=op.loc, result_hints=hints)
        elif isinstance(op, T.KernelOp):
            params = op.read_buffers() + op.stored_buffers()
            module.body.insert_before(func, _Materializer(op, params).build())
            new = K.LaunchOp(params, (), {"callee": SymbolRef(op.sym_name)}, loc=op.loc)
        else:
            continue
        func.body.insert_before(op, new)
        for old, r in zip(op.results, new.results):
            old.replace_all_uses_with(r)
        op.erase()


def _value_hint(v: Value) -> str | None:
    hint = v.name_hint
    return hint if hint and not hint.isdigit() else None


class _Materializer:
    def __init__(self, tk: T.KernelOp, params: list[Value]):
        self.tk = tk
        attrs = {k: v for k, v in tk.attributes.items() if k not in ("sym_name", "grid", "block", "tune")}
        if any(p.type.numel > _INDEX_LIMIT for p in params):
            attrs["index_bits"] = 64
        types = [PtrType(p.type.dtype) for p in params]
        kb = KernelBuilder.kernel(
            tk.sym_name, types, tk.attributes["grid"], tk.attributes["block"], names=[_value_hint(p) for p in params]
        )
        kb.op.loc = kb.loc = tk.loc
        kb.op.attributes.update(attrs)
        self.kb = kb
        self.ptr = dict(zip(params, kb.args))
        self.env: dict[Value, Value] = {}
        self.lanes: set[Value] = set()  # tile values that vary along the vector lanes (register tiles, or base indices)
        self.width = 1  # lanes of the vectorized loop being materialized
        self.hw: dict[str, Value] = {}
        self.n_smem = 0
        self.n_top = 0

    def build(self) -> K.KernelFuncOp:
        self.block(self.tk.body)
        return self.kb.op

    # ---- the kernel's prologue: shared buffers, then hardware indices ---------------------------------------------
    def _prologue(self, op: Operation, smem: bool) -> Value:
        op.loc = self.tk.loc
        at = self.n_smem if smem else self.n_top
        self.kb.op.body.insert(at, op)
        self.n_top += 1
        self.n_smem += int(smem)
        return op.result

    def axis(self, a: str) -> Value:
        if a not in self.hw:
            group, dim = a.split(".")
            cls = K.ThreadIdOp if group == "threadIdx" else K.BlockIdOp
            self.hw[a] = self._prologue(cls((), [index], {"dim": dim}, result_hints=[_HW_HINTS[a]]), smem=False)
        return self.hw[a]

    def smem(self, t: SmemType, hint: str) -> Value:
        return self._prologue(K.SmemOp((), [t], {}, result_hints=[hint]), smem=True)

    # ---- index expressions ------------------------------------------------------------------------------------
    def kexpr(self, e: ix.IndexExpr) -> ix.IndexExpr:
        """A tile-level expression (leaves: tile values) over the kernel values they became."""
        if isinstance(e, ValueDim):
            return Val(self.env[e.value])
        kids = e.children()
        return e.rebuild([self.kexpr(k) for k in kids]) if kids else e

    def unit(self, bind) -> ix.IndexExpr:
        u: ix.IndexExpr = ix.Const(0)
        for a in bind:
            u = u * self.tk.axis_size(a) + Val(self.axis(a))
        return u

    def linear_thread(self) -> ix.IndexExpr:
        t: ix.IndexExpr = ix.Const(0)
        for a in reversed(T.THREAD_AXES):
            t = t * self.tk.axis_size(a) + (Val(self.axis(a)) if self.tk.axis_size(a) > 1 else 0)
        return t

    def bind_indices(self, loop: T.LoopOp, w: Value) -> None:
        """Map the loop's indices to kernel values delinearized from work item `w`."""
        ext, v = loop.extents, loop.vector
        lin = Val(w) * v
        for k, (iv, e) in enumerate(zip(loop.ivs, ext)):
            inner = math.prod(ext[k + 1 :])
            x = lin // inner if inner != 1 else lin
            if k > 0:
                x = x % e
            if isinstance(x, Val):
                self.env[iv] = x.value
            else:
                self.env[iv] = self.kb.index(x, _value_hint(iv))
        if v > 1:
            self.lanes.add(loop.ivs[-1])

    # ---- ops ----------------------------------------------------------------------------------------------------
    def block(self, block) -> None:
        for op in block.ops:
            self.op(op)

    def op(self, op: Operation) -> None:
        kb = self.kb
        kb.loc = op.loc
        hint = _value_hint(op.results[0]) if op.results else None
        if isinstance(op, ScalarMathOp):
            for v in op.operands:
                if v in self.lanes and v.type == index:
                    raise op.error("uses a vectorized loop's index as a value; only subscripts may use it")
            self._define(op, kb.scalar(op.fn, *(self.env[v] for v in op.operands), hint=hint))
        elif isinstance(op, ConstOp):
            self._define(op, kb.const(op.attributes["value"], op.result.type, hint))
        elif isinstance(op, CastOp):
            src = self.env[op.operand]
            if op.operand in self.lanes and op.operand.type == index:
                raise op.error("uses a vectorized loop's index as a value; only subscripts may use it")
            t = op.result.type
            self._define(op, kb.cast(src, TensorType(t, (self.width,)) if op.operand in self.lanes else t, hint))
        elif isinstance(op, T.IndexOp):
            self._define(op, kb.index(self.kexpr(op.index_expr()), hint))
        elif isinstance(op, T.LoadOp):
            self.load(op, hint)
        elif isinstance(op, T.StoreOp):
            self.store(op)
        elif isinstance(op, T.ForOp):
            self.for_(op)
        elif isinstance(op, T.ReduceOp):
            self.reduce(op)
        elif isinstance(op, T.CombineOp):
            self.combine(op)
        elif isinstance(op, T.StageOp):
            self.stage(op)
        elif not isinstance(op, T.YieldOp):
            raise op.error("cannot be materialized at the kernel level")

    def _define(self, op: Operation, value: Value) -> None:
        self.env[op.result] = value
        if any(v in self.lanes for v in op.operands):
            self.lanes.add(op.result)

    def _lane_type(self, t):
        return TensorType(t, (self.width,))

    # ---- memory -------------------------------------------------------------------------------------------------
    def _address(self, op, source: Value) -> tuple[Value, list]:
        exprs = [self.kexpr(e) for e in op.index_exprs()]
        if isinstance(source, Value) and source in self.ptr:
            shape = source.type.shape
            flat: ix.IndexExpr = ix.Const(0)
            for e, n in zip(exprs, shape):
                flat = flat * n + e
            return self.ptr[source], [flat]
        return self.env[source], exprs

    def load(self, op: T.LoadOp, hint) -> None:
        mem, idx = self._address(op, op.buffer)
        lane = any(v in self.lanes for v in op.indices)
        t = self._lane_type(op.result.type) if lane else op.result.type
        self.env[op.result] = self.kb.load(mem, idx, t, hint)
        if lane:
            self.lanes.add(op.result)

    def store(self, op: T.StoreOp) -> None:
        kb = self.kb
        mem, idx = self._address(op, op.buffer)
        value = self.env[op.value]
        lane_addr = any(v in self.lanes for v in op.indices)
        if op.value in self.lanes and not lane_addr:
            raise op.error("stores a vector's lanes to one address (the subscripts do not use the vectorized index)")
        if lane_addr and op.value not in self.lanes:
            value = kb.splat(value, self._lane_type(op.value.type))
        cond = self.single_writer(op)
        if cond is None:
            kb.store(value, mem, idx)
            return
        with kb.if_(cond) as br, br.then():
            kb.store(value, mem, idx)

    def single_writer(self, op: Operation) -> Value | None:
        """The condition under which this thread performs a store at `op` (None: every thread that reaches it)."""
        bound = T.bound_axes(op)
        cond = None
        for a in T.AXES:
            if a not in bound and self.tk.axis_size(a) > 1:
                zero = self.kb.const(0, index)
                first = self.kb.scalar("eq", self.axis(a), zero)
                cond = first if cond is None else self.kb.scalar("and", cond, first)
        return cond

    def stage(self, op: T.StageOp) -> None:
        kb = self.kb
        src = op.source
        box, dtype = op.box, op.result.type.dtype
        name = f"{_value_hint(src) or 'buffer'}_smem"
        smem = self.smem(SmemType(dtype, box), name)
        if any(lp.work_items > lp.units(self.tk) for lp in T.enclosing_loops(op)):
            kb.barrier()  # a thread may come here again: the previous trip's readers of the box must be done
        offsets = [self.kexpr(e) for e in op.index_exprs()]
        shape = src.type.shape
        vec = _copy_width(op, box, shape, dtype.bytes)
        numel = math.prod(box)
        threads = self.tk.threads
        t = dtype if vec == 1 else TensorType(dtype, (vec,))
        with self.strided(self.linear_thread() * vec, numel, threads * vec, hint="e") as (_, e):
            local, flat = [], ix.Const(0)
            for d, (o, n, size) in enumerate(zip(offsets, box, shape)):
                inner = math.prod(box[d + 1 :])
                i = ix.Const(0) if n == 1 else Val(e) // inner if inner != 1 else Val(e)
                if n > 1 and inner * n < numel:
                    i = i % n
                local.append(i)
                flat = flat * size + (o + i)
            v = kb.load(self.ptr[src], [flat], t, "v")
            kb.store(v, smem, local)
        kb.barrier()
        self.env[op.result] = smem

    # ---- loops --------------------------------------------------------------------------------------------------
    @contextmanager
    def strided(self, first, count: int, step: int, carries=(), hint: str = "w"):
        """A loop over the items `first, first + step, ...` below `count` (0 <= first < step); yields the loop and
        the item. Where `step` divides `count`, every thread makes the same trips: the loop counts them and is
        unrolled (fully up to FULL_UNROLL trips), so the compiler can issue all the trips' loads before the first
        is used (one load in flight per thread cannot cover DRAM latency)."""
        kb = self.kb
        if step > 1 and count % step == 0:
            trips = count // step
            with kb.for_(0, trips, carries=carries, hint="k", unroll=0 if trips <= FULL_UNROLL else UNROLL) as lp:
                yield lp, kb.index(Val(lp.iv) * step + first, hint)
        else:
            with kb.for_(first, count, step=step, carries=carries, hint=hint) as lp:
                yield lp, lp.iv

    def _with_width(self, loop: T.LoopOp):
        outer = self.width
        if loop.vector > 1:
            self.width = loop.vector
        return outer

    def for_(self, op: T.ForOp) -> None:
        kb = self.kb
        w_count, units = op.work_items, op.units(self.tk)
        single = len(op.ivs) == 1 and op.vector == 1
        w_hint = _value_hint(op.ivs[0]) if single else "w"
        outer = self._with_width(op)

        def body(w: Value) -> None:
            self.bind_indices(op, w)
            self.block(op.body)

        if op.bind and units == w_count:
            body(kb.index(self.unit(op.bind), w_hint))
        elif op.bind and units > w_count:
            u = kb.index(self.unit(op.bind), w_hint)
            live = kb.scalar("lt", u, kb.const(w_count, index))
            with kb.if_(live) as br, br.then():
                body(u)
        else:
            lower, step = (self.unit(op.bind), units) if op.bind else (0, 1)
            with self.strided(lower, w_count, step, hint=w_hint) as (_, w):
                body(w)
        self.width = outer

    def reduce(self, op: T.ReduceOp) -> None:
        kb = self.kb
        inits = [kb.const(x, r.type) for _, init, rs in op.carriers for x, r in zip(init, rs)]
        lower, step = (self.unit(op.bind), op.units(self.tk)) if op.bind else (0, 1)
        single = op.vector == 1
        outer = self._with_width(op)
        hint = _value_hint(op.iv) if single else "w"
        with self.strided(lower, op.work_items, step, carries=inits, hint=hint) as (lp, w):
            for carry, r in zip(lp.carries, op.results):
                carry.name_hint = f"{_value_hint(r) or 'acc'}_acc"
            self.bind_indices(op, w)
            self.block(op.body)
            ys = [self.env[v] for v in op.yielded]
            new, at = [], 0
            for monoid, _, results in op.carriers:
                n = len(results)
                types = [r.type for r in results]
                element = ys[at : at + n]
                if op.vector > 1:
                    element = self.fold_lanes(monoid, element)
                new += self.combine_values(monoid, lp.carries[at : at + n], element, types)
                at += n
            lp.yield_(*new)
        self.width = outer
        for r, v in zip(op.results, lp.results):
            v.name_hint = _value_hint(r)
            self.env[r] = v

    def fold_lanes(self, monoid, element: list[Value]) -> list[Value]:
        """A register tile of elements folded into one carrier in the thread."""
        kb = self.kb
        if monoid.width == 1:
            v = element[0]
            return [
                kb.reduce(monoid.name, v if isinstance(v.type, TensorType) else kb.splat(v, self._lane_type(v.type)))
            ]
        # The online carrier of a tile (x, w1..wk): m = max(x), s_i = sum(w_i * exp(x - m)), a scalar weight taken
        # out of the sum. Below a finite m an element at -inf adds exp(-inf) = 0; a tile all at -inf has m = -inf and
        # would sum NaNs (exp(-inf - -inf)), so its sums are 0: one guard per tile, not per element.
        x, weights = element[0], element[1:]
        if not isinstance(x.type, TensorType):
            x = kb.splat(x, self._lane_type(x.type))
        et = x.type.dtype
        m = kb.reduce("max", x, hint="tile_max")
        e = kb.scalar("exp", kb.scalar("sub", x, m))
        empty = kb.scalar("eq", m, kb.const(float("-inf"), et))
        zero, sums = kb.const(0.0, et), []
        for w in weights:
            if isinstance(w.type, TensorType):
                s = kb.reduce("add", kb.scalar("mul", w, e))
            else:
                s = kb.scalar("mul", w, kb.reduce("add", e))
            sums.append(kb.scalar("select", empty, zero, s))
        return [m, *sums]

    def combine_values(self, monoid, a: list[Value], b: list[Value], types) -> list[Value]:
        """The monoid's combine program on two carriers (kernel values)."""
        steps, outputs = monoid.combine_program(len(types))
        env = {f"a{i}": v for i, v in enumerate(a)} | {f"b{i}": v for i, v in enumerate(b)}
        for st in steps:
            named = [env[x] for x in st.args if isinstance(x, str)]
            typed = next((v.type for v in named if v.type != boolean), types[0])
            args = [env[x] if isinstance(x, str) else self.kb.const(float(x), typed) for x in st.args]
            env[st.result] = self.kb.scalar(st.op, *args)
        return [env[o] for o in outputs]

    def combine(self, op: T.CombineOp) -> None:
        n = self.tk.axis_size("threadIdx.x")
        carriers = [(m, [self.env[v] for v in vals]) for m, _, vals in op.carriers]
        if n == 1:  # one thread along x: its carrier is the combine
            for r, v in zip(op.results, op.operands):
                self.env[r] = self.env[v]
            return
        if self.tk.threads % 32:  # a partial warp: shuffles need all 32 lanes, so go through shared memory
            carriers = self._through_smem(carriers, n, 1)
            for r, v in zip(op.results, [v for _, comps in carriers for v in comps]):
                v.name_hint = v.name_hint or _value_hint(r)
                self.env[r] = v
            return
        carriers = self._butterfly(carriers, min(n, 32))
        if n > 32:
            carriers = self._through_smem(carriers, n // 32, 32)
        results = [v for _, comps in carriers for v in comps]
        for r, v in zip(op.results, results):
            v.name_hint = _value_hint(r) or v.name_hint
            self.env[r] = v

    def _butterfly(self, carriers, width: int):
        """The xor-shuffle ladder over `width` lanes (offsets width/2 .. 1) as one loop carrying the carriers and
        the offset, unrolled when printed: its combine program appears once in the IR."""
        kb = self.kb
        steps = width.bit_length() - 1
        if steps == 0:
            return carriers
        flat = [c for _, comps in carriers for c in comps]
        first = kb.const(width // 2, index)
        with kb.for_(0, steps, carries=[*flat, first], hint="step", unroll=0) as lp:
            *cur, off = lp.carries
            off.name_hint = "offset"
            new, at = [], 0
            for monoid, comps in carriers:
                mine = cur[at : at + len(comps)]
                other = [kb.shfl("xor", c, Val(off), width=width if width < 32 else None) for c in mine]
                new += self.combine_values(monoid, mine, other, [c.type for c in comps])
                at += len(comps)
            lp.yield_(*new, kb.index(Val(off) // 2))
        out, at = [], 0
        for monoid, comps in carriers:
            warp = lp.results[at : at + len(comps)]
            for c, r in zip(comps, warp):
                r.name_hint = f"{c.name_hint}_warp" if c.name_hint else None
            out.append((monoid, warp))
            at += len(comps)
        return out

    def _through_smem(self, carriers, slots: int, every: int):
        """The carriers of every `every`-th thread along x (a warp's first lane, or each thread) into shared memory,
        a barrier, then every thread folds its row's `slots` carriers."""
        kb = self.kb
        rows = self.tk.axis_size("threadIdx.y") * self.tk.axis_size("threadIdx.z")
        row = ix.Const(0)
        for a in ("threadIdx.z", "threadIdx.y"):
            row = row * self.tk.axis_size(a) + (Val(self.axis(a)) if self.tk.axis_size(a) > 1 else 0)
        tx = Val(self.axis("threadIdx.x"))
        parts = [[self.smem(SmemType(c.type, (rows, slots)), "partial") for c in comps] for _, comps in carriers]

        def publish():
            for (_, comps), bufs in zip(carriers, parts):
                for c, buf in zip(comps, bufs):
                    kb.store(c, buf, [row, tx // every])

        if every > 1:
            lane = kb.index(tx % every, "lane")
            with kb.if_(kb.scalar("eq", lane, kb.const(0, index))) as br, br.then():
                publish()
        else:
            publish()
        kb.barrier()
        out = []
        for (monoid, comps), bufs in zip(carriers, parts):
            types = [c.type for c in comps]
            ids = [kb.const(monoid.identity(t, i), t) for i, t in enumerate(types)]
            with kb.for_(0, slots, carries=ids, hint="k") as lp:
                got = [kb.load(buf, [row, Val(lp.iv)], t) for buf, t in zip(bufs, types)]
                lp.yield_(*self.combine_values(monoid, lp.carries, got, types))
            out.append((monoid, lp.results))
        kb.barrier()  # the partials are read before a later combine may overwrite them
        return out


def _copy_width(op: T.StageOp, box, shape, nbytes: int) -> int:
    """Elements per access of a stage's copy: 16 bytes when rows of the box and of the buffer allow it."""
    v = max(1, 16 // nbytes)
    last = op.index_exprs()[-1]
    while v > 1 and (box[-1] % v or shape[-1] % v or not multiple_of(last, v)):
        v //= 2
    return v


def multiple_of(e: ix.IndexExpr, k: int) -> bool:
    """Whether `e` is a multiple of `k` for every value of its leaves (a sufficient, structural test)."""
    if isinstance(e, ix.Const):
        return e.value % k == 0
    if isinstance(e, (ix.Add, ix.Sub)):
        return multiple_of(e.lhs, k) and multiple_of(e.rhs, k)
    if isinstance(e, ix.Mul):
        return any(isinstance(x, ix.Const) and x.value % k == 0 for x in (e.lhs, e.rhs)) or (
            multiple_of(e.lhs, k) or multiple_of(e.rhs, k)
        )
    return False
