"""tile -> kernel: materialize each kernel's schedule with hardware primitives, one path for every kernel kind.

A `tile.kernel` becomes a `kernel.func` (one `!kernel.ptr` parameter per buffer it reads, then per buffer it
writes) and a `kernel.launch` in its place; `tile.buffer` and `tile.param` become `kernel.alloc` and
`kernel.param`. Inside, each tile op has one rule (`RULES`, below and in `memory.py` and `combines.py`):

- a loop distributed `by` axes: its unit `u` from the hardware indices, then `for (w = u; w < W; w += P)` over
  work items (just `w = u` when P = W, a guard when P > W); when P divides W every thread makes W / P trips, and
  the loop counts them (unrolled), so a thread's loads of all its trips are in flight at once; a loop without
  `by`: `for (w = 0; w < W; ++w)`. The loop indices come from `w` by the loop's layout
  (`irforge.dialects.tile.layout`);
- `vector`: each dimension a work item is wider than one along is a *lane dimension*; a value of the body is a
  register tile with one dimension per lane dimension around it (its width where the value varies along it, 1
  where it does not), so an `[8, 8]` accumulator is the product of an `[8, 1]` column and a `[1, 8]` row. Tiles
  are ordinary kernel values: their types say their shape;
- `tile.reduce`: a `kernel.for` carrying the carriers (tiles where the elements vary along outer lane
  dimensions); its own lane dimensions fold into the carrier with the monoid's `fold_program` (straight into the
  accumulator, one element after another, where the monoid allows: fused multiply-adds), then the
  `combine_program`, so every monoid takes the same path; 0 trips where a mask makes every element of the block's
  the identity (`masked.py`);
- loads and stores: one (strided) tile access, vectors where the lanes are contiguous and provably aligned
  (`memory.py`); stages: shared-memory copies, multi-buffered, asynchronous and software-pipelined as the stage
  says (`memory.py`); `tile.combine`: shuffles and shared memory (`combines.py`);
- `tile.store`: guarded by the single-writer rule (index 0 along every launch axis no enclosing loop uses).
"""

from __future__ import annotations

from contextlib import contextmanager

from irforge.dialects import tile as T
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel import warpgroup as WG
from irforge.dialects.kernel.builder import KernelBuilder, Val
from irforge.dialects.kernel.types import PtrType, element_type, with_element_type
from irforge.dialects.loop.indexing import ValueDim
from irforge.dialects.scalar import CastOp, ConstOp, ScalarMathOp
from irforge.dialects.tile import vectors

from irforge import index_expr as ix
from irforge.attributes import UNIT, SymbolRef
from irforge.builtin import FuncOp
from irforge.ir import Operation, Value
from irforge.pass_manager import Pass, option
from irforge.scalar_ops import MONOIDS
from irforge.target import target
from irforge.types import TensorType, boolean, index

from . import clusters, combines, flash, keyed, masked, memory, partials, tensor_cores
from .emit import FULL_UNROLL, FULL_UNROLL_REGISTERS, combine_values, strided, value_hint

_HW_HINTS = {"threadIdx.x": "tx", "threadIdx.y": "ty", "threadIdx.z": "tz"}
_HW_HINTS |= {"blockIdx.x": "bx", "blockIdx.y": "by", "blockIdx.z": "bz"}
_INDEX_LIMIT = 2**31 - 1
# The kernel.reduce kind that folds with each scalar op (a fold program's `fold:<op>` steps).
_FOLD_KINDS = {m.op: name for name, m in MONOIDS.items() if m.width == 1}


class LowerToKernel(Pass):
    """Materialize each tile kernel's schedule as a kernel.func launched from the host function."""

    name = "lower-to-kernel"
    input_level = "tile"
    output_level = "kernel"
    skip_masked: bool = option(True, help="skip a reduction's trips a mask makes the identity (masked.py)")
    keyed_chunks: bool = option(True, help="fold a chunk of a keyed carrier's elements key first (keyed.py)")

    def check(self, op: Operation) -> tuple[Operation, str] | None:
        for k in _tile_kernels(op):
            found = unmaterializable(k)
            if found is not None:
                return found[0], f"cannot be materialized: {found[1]}"
        return None

    def run(self, op: Operation) -> None:
        for func in [f for f in op.body.ops if isinstance(f, FuncOp)]:
            partials.split_kernels(func)
            _materialize_function(func, op, self.skip_masked, self.keyed_chunks)


def _tile_kernels(module: Operation) -> list[T.KernelOp]:
    return [k for k in module.walk() if isinstance(k, T.KernelOp)]


def unmaterializable(kernel: T.KernelOp) -> tuple[Operation, str] | None:
    """The first op of `kernel` this pass cannot materialize, and why (None when it can do them all)."""
    for op in kernel.walk():
        why = combines.why_not(kernel, op) or memory.why_not(kernel, op) or tensor_cores.why_not(kernel, op)
        if why:
            return op, why
        block_wide = isinstance(op, T.StageOp) or (
            isinstance(op, T.CombineOp) and (op.over[0] in T.THREAD_AXES or clusters.via_cluster(op))
        )
        lp = T.uneven_loop(kernel, op) if block_wide else None  # atomics need no thread beside; a cluster, all
        if lp is not None:
            return op, (
                f"needs its block's threads together, but it sits in a loop distributed over {', '.join(lp.bind)} "
                f"whose {lp.work_items} work items do not split evenly over {lp.units(kernel)} units"
            )
        if isinstance(op, T.LoopOp) and op.vector > 1:
            why = vectors.why_not(op)
            if why:
                return op, f"is vectorized by {list(op.vector_shape)}, but {why}"
    return None


def _materialize_function(func: FuncOp, module: Operation, skip_masked: bool = True, keyed_chunks: bool = True) -> None:
    for op in list(func.body.ops):
        hints = [r.name_hint for r in op.results]
        if isinstance(op, T.ParamOp):
            new = K.ParamOp((), [op.result.type], {"sym": op.attributes["sym"]}, loc=op.loc, result_hints=hints)
        elif isinstance(op, T.BufferOp):
            new = K.AllocOp((), [op.result.type], {}, loc=op.loc, result_hints=hints)
        elif isinstance(op, T.KernelOp):
            params = memory.params(op)
            mat = Materializer(op, params, skip_masked, keyed_chunks)
            module.body.insert_before(func, mat.build())
            for k, buf in enumerate(mat.zeroed):
                name = f"{op.sym_name}_zero{k}"
                module.body.insert_before(func, zero_kernel(name, buf.type, op.loc))
                func.body.insert_before(op, K.LaunchOp([buf], (), {"callee": SymbolRef(name)}, loc=op.loc))
            new = K.LaunchOp([b for b, _ in params], (), {"callee": SymbolRef(op.sym_name)}, loc=op.loc)
        else:
            continue
        func.body.insert_before(op, new)
        for old, r in zip(op.results, new.results):
            old.replace_all_uses_with(r)
        op.erase()


def zero_kernel(name: str, t: TensorType, loc) -> K.KernelFuncOp:
    """A kernel that sets every element of a buffer of type `t` to zero (16-byte stores where they divide it)."""
    vec = max(1, 16 // t.dtype.bytes)
    while t.numel % vec:
        vec //= 2
    threads, items = 256, t.numel // vec
    grid = max(1, min(-(-items // threads), target().sm_count * 8))
    kb = KernelBuilder.kernel(name, [PtrType(t.dtype)], grid, threads, names=["out"], loc=loc)
    (out,) = kb.args
    tid = kb.index(Val(kb.block_id("x", "bx")) * threads + Val(kb.thread_id("x", "tx")), "i")
    zero = kb.const(0.0 if t.dtype.is_float else 0, t.dtype if vec == 1 else TensorType(t.dtype, (vec,)), "zero")
    with strided(kb, Val(tid), items, grid * threads, hint="w") as (_, w):
        kb.store(zero, out, [Val(w) * vec])
    return kb.op


class Materializer:
    """Builds one kernel.func from one tile.kernel. `env` maps tile values to kernel values (a lane index to its
    lane 0); `lanes` is the stack of lane dimensions around the op being materialized (the register-tile
    dimensions, outermost first); `trip` the work item each enclosing loop is on."""

    def __init__(self, tk: T.KernelOp, params, skip_masked: bool = True, keyed_chunks: bool = True):
        self.tk = tk
        self.skip_masked = skip_masked
        self.keyed_chunks = keyed_chunks
        attrs = {k: v for k, v in tk.attributes.items() if k not in ("sym_name", "grid", "block", "tune")}
        if any(p.type.numel > _INDEX_LIMIT for p, _ in params):
            attrs["index_bits"] = 64
        names = [value_hint(p) if isinstance(t, PtrType) else f"{value_hint(p) or 'buffer'}_map" for p, t in params]
        self.producer = memory.producer_stages(tk)
        self.registers = memory.producer_registers(tk) if self.producer else None
        block = tk.attributes["block"]
        if self.producer:  # a warp (or warpgroup) more along x, after the block's threads (memory.produce)
            block = (block[0] + (WG.WARPGROUP if self.registers else target().warp_size), *block[1:])
        kb = KernelBuilder.kernel(tk.sym_name, [t for _, t in params], tk.attributes["grid"], block, names=names)
        kb.op.loc = kb.loc = tk.loc
        kb.op.attributes.update(attrs)
        self.kb = kb
        self.ptr = {p: a for (p, t), a in zip(params, kb.args) if isinstance(t, PtrType)}
        self.tmap = {(p, t): a for (p, t), a in zip(params, kb.args) if not isinstance(t, PtrType)}
        self.env: dict[Value, Value] = {}
        self.lanes: list[vectors.LaneDim] = []
        self.varies = vectors.Lanes()
        self.trip: dict[T.LoopOp, Value] = {}
        self.hw: dict[str, Value] = {}
        self.staged: dict[Value, memory.Staged] = {}
        self.stage_smem: dict[T.StageOp, Value] = {}
        self.stage_bars: dict = {}  # a `tma` stage's mbarriers; a loop's `empty` ones (producer stages)
        self.carry_into: dict[T.ReduceOp, list[Value]] = {}  # a chunk's init: its enclosing trip's carrier
        self.affine: dict[Value, combines.Affine] = {}  # values that are affine in a cross-block partial
        self.atomic_axis: str | None = None  # the block axis cross-block partials are added over
        self.zeroed: list[Value] = []  # buffers a kernel launched first must zero (atomics add into them)
        self.wgmma_in_flight: set[T.LoopOp] = set()  # loops whose trips leave their wgmma group in flight
        self.waits_after_prologue: set[T.LoopOp] = set()  # loops whose prologue an earlier copy's wait follows
        self.unwaited: list[T.StageOp] = []  # stages copied in a run whose wait comes with the run's last (memory.py)
        self.ghost_lanes: dict[T.ForOp, int] = {}  # atom loops whose lanes past this many hold ghost rows
        self.before_keys: dict[T.ReduceOp, tuple] = {}  # attention's warp origin and Q fragments (flash.py)
        self.trip_bound: dict[T.LoopOp, Value] = {}  # loops a mask cuts short: the trips they make (masked.py)
        self.recomputed: list[Operation] = []  # ops a branch recomputes (combines.constant_share): erased if unused
        self.n_smem = 0
        self.static_smem = 0  # bytes of the static shared buffers so far
        self.n_top = 0

    def build(self) -> K.KernelFuncOp:
        if self.producer:
            self._specialized()
        else:
            self.block(self.tk.body)
        for op in reversed(self.recomputed):  # their uses are all known now
            if not any(r.uses for r in op.results):
                op.erase()
        return self.kb.op

    def _specialized(self) -> None:
        """A kernel whose stages a producer warp copies: the mbarriers set up by the whole block, then the producer
        warp's program and, on the block's own threads, the kernel's body."""
        kb = self.kb
        memory.init_producer(self, self.producer)
        lin = kb.index(self.linear_thread(), "lin")
        with kb.if_(kb.scalar("lt", lin, kb.const(self.tk.threads, index))) as br:
            with br.otherwise():
                if self.registers:
                    kb.setmaxnreg("dec", self.registers[0])
                memory.produce(self, self.producer)
            self.env.clear()  # nothing the producer's branch computed is visible in the body's
            self.trip.clear()
            with br.then():
                if self.registers:
                    kb.setmaxnreg("inc", self.registers[1])
                self.block(self.tk.body)

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

    def smem(self, t, hint: str) -> Value:
        """A shared buffer; large ones (over half the static limit), and any the static limit has no room left
        for, in dynamic shared memory."""
        limit = target().smem_static
        dynamic = t.nbytes > limit // 2 or self.static_smem + t.nbytes > limit
        if not dynamic:
            self.static_smem += t.nbytes
        attrs = {"dynamic": UNIT} if dynamic else {}
        return self._prologue(K.SmemOp((), [t], attrs, result_hints=[hint]), smem=True)

    # ---- index expressions ------------------------------------------------------------------------------------
    def kexpr(self, e: ix.IndexExpr) -> ix.IndexExpr:
        """A tile-level expression (leaves: tile values; `tile.index` results that vary with the lanes expanded)
        over the kernel values they became (a lane index stands for its lane 0)."""
        if isinstance(e, ValueDim):
            if e.value in self.env:
                return Val(self.env[e.value])
            return self.kexpr(vectors.expand(e))
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

    # ---- register tiles -----------------------------------------------------------------------------------------
    def tile_type(self, dtype, v: Value, lanes):
        """The kernel type tile value `v` (of element type `dtype`) has in the lane context `lanes`."""
        deps = self.varies.of(v)
        if not any(ld in deps for ld in lanes):
            return dtype
        return TensorType(dtype, tuple(ld.size if ld in deps else 1 for ld in lanes))

    def get(self, v: Value) -> Value:
        """The kernel value of tile value `v` in the current lane context (a tile made in an outer context gains
        trailing dimensions of size 1; a lane index used as a value is the tile of its lanes' indices)."""
        if v.type == index and self.varies.of(v) & set(self.lanes):
            return self.index_tile(ValueDim(v))
        kv = self.env[v]
        t = kv.type
        if isinstance(t, TensorType) and t.rank < len(self.lanes):
            return self.kb.reshape(kv, TensorType(t.dtype, t.shape + (1,) * (len(self.lanes) - t.rank)))
        return kv

    def index_tile(self, e: ix.IndexExpr) -> Value:
        """An index expression over lane indices as a register tile of index values (each lane index is its lane
        0's value plus the tile of its lanes' offsets)."""
        kb = self.kb
        if isinstance(e, ValueDim):
            ld = next((ld for ld in self.lanes if ld.iv is e.value), None)
            if ld is None:
                return self.index_tile(vectors.expand(e)) if e.value not in self.env else self.env[e.value]
            shape = tuple(ld.size if x is ld else 1 for x in self.lanes)
            offsets = tuple(ld.loop.layout.lane_offset(ld.dim, k) for k in range(ld.size))
            return kb.scalar("add", self.env[e.value], kb.const(offsets, TensorType(index, shape)))
        if isinstance(e, ix.Const):
            return kb.const(e.value, index)
        if isinstance(e, ix.CeilDiv):
            return self.index_tile((e.lhs + e.rhs - 1) // e.rhs)
        ops = {ix.Add: "add", ix.Sub: "sub", ix.Mul: "mul", ix.FloorDiv: "floordiv", ix.Mod: "remainder",
               ix.Min: "minimum", ix.Max: "maximum"}  # fmt: skip
        return kb.scalar(ops[type(e)], *(self.index_tile(k) for k in e.children()))

    # ---- ops ----------------------------------------------------------------------------------------------------
    def block(self, block) -> None:
        for op in block.ops:
            self.op(op)

    def op(self, op: Operation) -> None:
        self.kb.loc = op.loc
        rule = RULES.get(type(op)) or next((r for cls, r in RULES.items() if isinstance(op, cls)), None)
        if rule is None:
            raise op.error("cannot be materialized at the kernel level")
        rule(self, op)


def _hint(op: Operation) -> str | None:
    return value_hint(op.results[0]) if op.results else None


def _scalar_math(m: Materializer, op: ScalarMathOp) -> None:
    placeholder = combines.affine_math(m, op)
    if placeholder is not None:  # an affine function of a cross-block partial: kept symbolic until its store
        m.env[op.result] = placeholder
        return
    m.env[op.result] = m.kb.scalar(op.fn, *(m.get(v) for v in op.operands), hint=_hint(op))


def _const(m: Materializer, op: ConstOp) -> None:
    m.env[op.result] = m.kb.const(op.attributes["value"], op.result.type, _hint(op))


def _cast(m: Materializer, op: CastOp) -> None:
    placeholder = combines.affine_math(m, op)
    if placeholder is not None:
        m.env[op.result] = placeholder
        return
    src = m.get(op.operand)
    m.env[op.result] = m.kb.cast(src, with_element_type(src.type, op.result.type), _hint(op))


def _index(m: Materializer, op: T.IndexOp) -> None:
    if m.varies.of(op.result):
        return  # it moves with the lanes: the subscripts that use it expand it (vectors.why_not allows no other use)
    m.env[op.result] = m.kb.index(m.kexpr(op.index_expr()), _hint(op))


def _yield(m: Materializer, op: T.YieldOp) -> None:
    """A reduction's yield is read by the reduction's rule."""


# ---- loops ---------------------------------------------------------------------------------------------------------
@contextmanager
def work_items(m: Materializer, op: T.LoopOp, carries=(), trips: Value | None = None):
    """The loop over this thread's work items of `op` (with its carries); yields (kernel loop or None, work item).
    `trips`: a kernel index bounding a loop no axis deals to its first `trips` work items (`masked.trips`)."""
    kb = m.kb
    w_count, units = op.work_items, op.units(m.tk)
    hint = (value_hint(op.ivs[0]) or "w") if len(op.ivs) == 1 and op.vector == 1 else "w"
    unroll = op.attributes.get("unroll")
    carried = sum(c.type.numel if isinstance(c.type, TensorType) else 1 for c in carries)
    if (unroll is None and not op.bind and w_count <= FULL_UNROLL and w_count * carried <= FULL_UNROLL_REGISTERS
            and not _holds_loops_or_collectives(op)):  # fmt: skip
        # A few straight trips: unrolled, the compiler overlaps one trip's loads with another's math. Not when
        # their register tiles add up past what a thread holds: ptxas then moves every tile to local memory.
        unroll = 0
    if op.bind and units == w_count and not carries:
        m.trip[op] = w = kb.index(m.unit(op.bind), hint)
        yield None, w
    elif op.bind and not carries and op.ghost_lanes(m.tk):
        # a warp's ghost rows on the atoms' top half: every lane takes part in the mma; only its stores are guarded
        m.trip[op] = u = kb.index(m.unit(op.bind), hint)
        m.ghost_lanes[op] = w_count
        yield None, u
    elif op.bind and units > w_count and not carries:
        m.trip[op] = u = kb.index(m.unit(op.bind), hint)
        with kb.if_(kb.scalar("lt", u, kb.const(w_count, index))) as br, br.then():
            yield None, u
    elif trips is not None and not op.bind:
        with kb.for_(0, Val(trips), carries=carries, hint=hint) as lp:
            m.trip[op] = lp.iv
            yield lp, lp.iv
    else:
        lower, step = (m.unit(op.bind), units) if op.bind else (0, 1)
        with strided(kb, lower, w_count, step, carries=carries, hint=hint, unroll=unroll) as (lp, w):
            m.trip[op] = w
            yield lp, w


def _holds_loops_or_collectives(op: T.LoopOp) -> bool:
    return any(isinstance(x, (T.LoopOp, T.StageOp, T.CombineOp)) for x in op.walk() if x is not op)


@contextmanager
def lanes_of(m: Materializer, op: T.LoopOp, w: Value):
    """Bind the loop's indices for work item `w` (a lane index to its lane 0) and push its lane dimensions."""
    layout = op.layout
    pushed = []
    for d, (iv, c) in enumerate(zip(op.ivs, layout.work_coords(Val(w)))):
        e = ix.as_expr(layout.index(d, c, 0))
        m.env[iv] = e.value if isinstance(e, Val) else m.kb.index(e, value_hint(iv))
        if layout.vector[d] > 1:
            pushed.append(vectors.LaneDim(op, d))
    m.lanes.extend(pushed)
    try:
        yield
    finally:
        del m.lanes[len(m.lanes) - len(pushed) :]


def _for(m: Materializer, op: T.ForOp) -> None:
    with memory.pipelined(m, op), work_items(m, op) as (_, w), lanes_of(m, op, w):
        memory.issue_ahead(m, op)
        m.block(op.body)
        memory.release(m, op)


def _reduce(m: Materializer, op: T.ReduceOp) -> None:
    if tensor_cores.contracts(op):
        tensor_cores.contract(m, op)
        return
    kb = m.kb
    outer = list(m.lanes)
    attention = flash.carrier_types(op)  # the carriers of a chain around a tensorized attention
    frag = None if attention else tensor_cores.accumulator(m, op)  # ... around a tensorized contraction
    types = attention or [frag or m.tile_type(r.type, r, outer) for _, _, results in op.carriers for r in results]
    inits = m.carry_into.pop(op, None) or [
        kb.const(x, t) for x, t in zip((x for _, init, _ in op.carriers for x in init), types)
    ]
    if attention and flash.applies(op):
        flash.fold(m, op, inits)
        return
    if m.keyed_chunks and not frag and not attention and keyed.applies(m, op):
        keyed.fold_chunk(m, op, inits)
        return
    chunk = _chunk(op)
    trips = (masked.trips(m, op) or masked.chunk_trips(m, op)) if m.skip_masked else None
    if trips is not None:
        m.trip_bound[op] = trips
    with memory.pipelined(m, op):
        if attention:
            flash.before_keys(m, op)  # after the prologue's waits: the slabs read before the loop have landed
        with work_items(m, op, carries=inits, trips=trips) as (lp, w):
            for carry, r in zip(lp.carries, op.results):
                carry.name_hint = f"{value_hint(r) or 'acc'}_acc"
            with lanes_of(m, op, w):
                memory.issue_ahead(m, op)
                if chunk is not None:
                    m.carry_into[chunk] = list(lp.carries)
                m.block(op.body)
                memory.release(m, op)
                own = [ld for ld in m.lanes if ld.loop is op]
                new, at = [], 0
                for monoid, _, results in op.carriers:
                    n = len(results)
                    element = [m.get(v) for v in op.yielded[at : at + n]]
                    if chunk is not None:
                        new += element  # the chunk folded straight into this trip's carrier
                    else:
                        new += fold(m, monoid, list(lp.carries[at : at + n]), element, own)
                    at += n
            lp.yield_(*new)
    for r, v in zip(op.results, lp.results):
        v.name_hint = value_hint(r)
        if attention:
            v = flash.register_tile(m, op, v)
        m.env[r] = tensor_cores.register_tile(m, op, v) if frag else v


def _chunk(op: T.ReduceOp) -> T.ReduceOp | None:
    """The inner reduction when `op` folds, each trip, the whole result of one reduction with its own monoids (a
    chunked reduction, `tile-chunk-reduce`): folding that chunk from the identity and combining it in is folding
    it starting from the carrier (associativity), so the chunk takes the carrier as its init, and no extra
    accumulator or combine is needed."""
    ops = [x for x in op.body.ops if not isinstance(x, (T.StageOp, T.YieldOp))]
    if len(ops) != 1 or not isinstance(ops[0], T.ReduceOp) or op.vector > 1:
        return None
    inner = ops[0]
    same = inner.attributes["monoids"] == op.attributes["monoids"] and tuple(op.yielded) == tuple(inner.results)
    return inner if same else None


def fold(m: Materializer, monoid, carry: list[Value], element: list[Value], own: list) -> list[Value]:
    """The carrier after folding one work item's element into it: a tile along the reduction's own lane dimensions
    `own` (the innermost of the context) folds with the monoid's fold program first, straight into the
    accumulator where the monoid allows."""
    kb = m.kb
    if not own:
        return combine_values(kb, monoid, carry, element)
    rank = len(m.lanes)
    axes = tuple(range(rank - len(own), rank))
    # An element counts once per own lane, also where it does not vary along it: broadcast it first.
    tiles = []
    for v, c in zip(element, carry):
        outer = c.type.shape if isinstance(c.type, TensorType) else (1,) * (rank - len(own))
        t = TensorType(element_type(v.type), outer + tuple(ld.size for ld in own))
        tiles.append(v if v.type == t else kb.splat(v, t))
    if monoid.folds_into_carrier():  # a scalar carrier under outer lanes it does not vary along: every axis
        whole = axes if isinstance(carry[0].type, TensorType) else tuple(range(rank))
        return [kb.reduce(monoid.name, tiles[0], axes=whole, init=carry[0])]
    steps, outputs = monoid.fold_program(len(tiles))
    env = {f"a{i}": t for i, t in enumerate(tiles)}
    for st in steps:
        named = [element_type(env[x].type) for x in st.args if isinstance(x, str)]
        typed = next(t for t in named if t != boolean)
        args = [env[x] if isinstance(x, str) else kb.const(float(x), typed) for x in st.args]
        if st.op.startswith("fold:"):
            t = args[0].type
            kept = TensorType(t.dtype, tuple(1 if i in axes else n for i, n in enumerate(t.shape)))
            r = kb.reduce(_FOLD_KINDS[st.op.removeprefix("fold:")], args[0], axes=axes)
            env[st.result] = kb.reshape(r, kept) if isinstance(r.type, TensorType) else kb.splat(r, kept)
        else:
            env[st.result] = kb.scalar(st.op, *args)
    folded = []
    for o, c in zip(outputs, carry):
        v = env[o]
        folded.append(kb.reshape(v, c.type) if isinstance(c.type, TensorType) else kb.extract(v, (0,) * rank))
    return combine_values(kb, monoid, carry, folded)


RULES = {
    ScalarMathOp: _scalar_math,
    ConstOp: _const,
    CastOp: _cast,
    T.IndexOp: _index,
    T.YieldOp: _yield,
    T.ForOp: _for,
    T.ReduceOp: _reduce,
    T.LoadOp: memory.load,
    T.StoreOp: memory.store,
    T.StageOp: memory.stage,
    T.CombineOp: combines.combine,
}
