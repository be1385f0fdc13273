"""Fusion of loop kernels, shared by the loop-fuse-* passes.

`inline_producer` replaces a consumer's loads of a buffer by the computation that produced the buffer's element at
those coordinates (the producer's backward slice from its store, reductions included), remapping the producer's
loop indices to the consumer's subscripts. Which producers to inline is each fusion pass's decision, made on a
trial copy and measured with `work`: the dynamic number of scalar ops plus the words loads and stores move
(constants, casts and index arithmetic are free), a loop's body counting once per iteration. Sibling merges put
loops over the same range into one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from irforge.dialects.loop import (
    BufferOp,
    ForOp,
    IndexOp,
    KernelOp,
    LoadOp,
    LoopOp,
    ParamOp,
    ReduceOp,
    StoreOp,
    YieldOp,
    indexing,
    kernel_name,
)
from irforge.dialects.loop.build import Builder
from irforge.dialects.loop.transforms import (
    captured_values,
    cleanup,
    defining_op,
    eliminate_common,
    eliminate_dead,
    is_returned,
    kernels,
    reader_kernels,
    self_and_ancestors,
    updated_states,
    writer,
)
from irforge.dialects.scalar import CastOp, ConstOp
from irforge.passes.loop.band import depends_on, follow_producer, reorder_band, split_loops
from irforge.passes.loop.tensor_cores import why_lost

from irforge.builtin import FuncOp
from irforge.index_expr import Const
from irforge.ir import Operation, OpResult, Value
from irforge.location import fuse

# Not counted as work: constants, index arithmetic, structure, and conversions (a cast is far cheaper than the load
# it follows, so reading bf16 and widening in the consumer beats storing the widened f32 copy).
_FREE = (ConstOp, CastOp, IndexOp, YieldOp, ForOp, ReduceOp, KernelOp)


# ---- cost ------------------------------------------------------------------------------------------------------
def work(root: Operation) -> float:
    """Dynamic work under `root`: each op once per iteration of its loops; a scalar op counts 1, a load or store
    its element's size in 4-byte words (so narrow buffers are cheaper to move), constants, casts and index
    arithmetic nothing."""
    return _work(root, 1, False)


def reduction_work(root: Operation) -> float:
    """The part of `work` spent inside reduce loops."""
    return _work(root, 1, False, only_reductions=True)


def _cost(op: Operation) -> float:
    if isinstance(op, _FREE):
        return 0.0
    if isinstance(op, (LoadOp, StoreOp)):
        return op.buffer.type.dtype.bytes / 4
    return 1.0


def _work(op: Operation, trips: int, in_reduction: bool, only_reductions: bool = False) -> float:
    total = _cost(op) * trips if (in_reduction or not only_reductions) else 0.0
    if isinstance(op, LoopOp):
        trips *= op.extent
        in_reduction = in_reduction or isinstance(op, ReduceOp)
    for region in op.regions:
        for block in region.blocks:
            for inner in block.ops:
                total += _work(inner, trips, in_reduction, only_reductions)
    return total


# ---- sibling reductions ----------------------------------------------------------------------------------------
def merge_sibling_reductions(kernel: Operation, max_carriers: int) -> bool:
    """Merge independent `loop.reduce`s of one block with the same extent into one loop carrying all their
    carriers (at most `max_carriers` components), at the first one's place. Returns whether anything merged."""
    changed = False
    while _merge_one(kernel, max_carriers):
        changed = True
    return changed


def _free_nest(loop: ForOp) -> tuple:
    """The extents of `loop` and of the free loops nested in it, level by level."""
    return (loop.extent, tuple(_free_nest(o) for o in loop.body.ops if isinstance(o, ForOp)))


def merge_sibling_loops(kernel: Operation) -> bool:
    """Fuse free loops of one block with the same nest of extents into one (at the later one's place: a free loop
    has no results and a kernel never reads what it stores, so nothing between them depends on the earlier one).
    Loops whose inner free loops differ stay apart: merged, only their common outer loop could be dealt over
    threads (RoPE on q [T, 32, 64] and k [T, 4, 64] in one launch ran 20x slower on T threads)."""
    changed = True
    any_change = False
    while changed:
        changed = False
        for block in [b for o in kernel.walk() for r in o.regions for b in r.blocks]:
            loops = [o for o in block.ops if isinstance(o, ForOp)]
            pair = next(
                ((a, b) for i, a in enumerate(loops) for b in loops[i + 1 :] if _free_nest(a) == _free_nest(b)), None
            )
            if pair is not None:
                first, second = pair
                body = list(first.body.ops)
                for op in reversed(body):
                    second.body.insert(0, op.detach())
                first.iv.replace_all_uses_with(second.iv)
                second.loc = fuse([first.loc, second.loc])
                first.erase()
                changed = any_change = True
                break
    return any_change


def _merge_one(kernel: Operation, max_carriers: int) -> bool:
    for block in [b for o in kernel.walk() for r in o.regions for b in r.blocks]:
        reds = [o for o in block.ops if isinstance(o, ReduceOp)]
        for i, first in enumerate(reds):
            for second in reds[i + 1 :]:
                if _can_merge(first, second, max_carriers):
                    _merge(first, second)
                    return True
    return False


def _can_merge(first: ReduceOp, second: ReduceOp, max_carriers: int) -> bool:
    if first.extent != second.extent or len(first.results) + len(second.results) > max_carriers:
        return False
    block = first.parent
    at = block.ops.index(first)
    for v in captured_values(second):
        owner = defining_op(v)
        # what the second loop reads must exist where the first one is (and must not be the first's results)
        for anc in self_and_ancestors(owner):
            if anc.parent is block:
                if block.ops.index(anc) >= at:
                    return False
                break
    return True


def _merge(first: ReduceOp, second: ReduceOp) -> None:
    carriers = [(m.name, init) for m, init, _ in first.carriers + second.carriers]
    types = [r.type for r in (*first.results, *second.results)]
    hints = [r.name_hint for r in (*first.results, *second.results)]
    b = Builder.before_op(first, fuse([first.loc, second.loc]))
    merged, iv, body = b.reduce(first.extent, carriers, types, first.iv.name_hint, hints)
    yielded = []
    for red in (first, second):
        vm = {red.iv: iv}
        for op in red.body.ops[:-1]:
            body.insert(op.clone(vm))
        yielded += [vm.get(v, v) for v in red.yielded]
    body.yield_(*yielded)
    for old, new in zip((*first.results, *second.results), merged.results):
        old.replace_all_uses_with(new)
    first.erase()
    second.erase()
    eliminate_common(merged)


# ---- moving a kernel up ----------------------------------------------------------------------------------------
def can_move_up(second: KernelOp, first: KernelOp, ks: list[KernelOp]) -> bool:
    """Whether `second` can run where `first` is (`ks`: the function's kernels in order): it reads nothing `first`
    or a kernel between them writes, and updates no state that they or it read on entry (the update would come
    before those reads)."""
    between = ks[ks.index(first) : ks.index(second)]
    for buf in second.loaded_buffers():
        if writer(buf) in between:
            return False
    func = first.parent_op
    ret = func.body.ops[-1]
    read = {id(b) for k in [*between, second] for b in k.loaded_buffers()}
    for _, arg, pos in func.state_pairs():
        if ret.operands[pos] in second.stored_buffers() and id(arg) in read:
            return False
    return all(isinstance(b.owner, BufferOp) for b in second.stored_buffers())


def move_up(second: KernelOp, first: KernelOp) -> None:
    """Declare the params and buffers `second` uses before `first`, so that it (or a kernel holding its ops) can go
    where `first` is."""
    func = first.parent_op
    at = func.body.ops.index(first)
    for v in captured_values(second):
        if isinstance(v.owner, (BufferOp, ParamOp)) and func.body.ops.index(v.owner) > at:
            v.owner.detach()
            func.body.insert_before(first, v.owner)


# ---- producer inlining -----------------------------------------------------------------------------------------
@dataclass
class Producer:
    """How kernel `kernel` writes every element of `buffer` exactly once: one store whose subscripts are its
    enclosing (free) loops' indices, one per dimension, or 0 on a dimension of size 1."""

    kernel: KernelOp
    buffer: Value
    store: StoreOp
    coords: list  # per buffer dimension: the loop index it is, or None (size-1 dimension, subscript 0)

    def slice(self) -> list[Operation]:
        """The kernel's ops the stored value depends on, in program order (reductions as whole ops)."""
        need: set[int] = set()
        work = [self.store.value]
        while work:
            v = work.pop()
            if not isinstance(v, OpResult) or not self.kernel.is_ancestor_of(v.op) or id(v.op) in need:
                continue
            need.add(id(v.op))
            work.extend(captured_values(v.op))
        return [op for op in self.kernel.walk() if id(op) in need]

    def has_reduction(self) -> bool:
        return any(isinstance(op, ReduceOp) for op in self.slice())


def producer_of(buffer: Value) -> Producer | None:
    """The kernel writing `buffer` and its store, when it has the shape inlining needs (see `Producer`)."""
    k = writer(buffer)
    if k is None:
        return None
    stores = [op for op in k.walk() if isinstance(op, StoreOp) and op.buffer is buffer]
    if len(stores) != 1:
        return None
    store = stores[0]
    loops = [a for a in self_and_ancestors(store.parent_op) if isinstance(a, LoopOp)]
    coords, used = [], set()
    for e, n in zip(store.index_exprs(), buffer.type.shape):
        if isinstance(e, indexing.ValueDim):
            lp = next((lp for lp in loops if lp.iv is e.value), None)
            if lp is None or not isinstance(lp, ForOp) or lp.extent != n or id(lp) in used:
                return None
            used.add(id(lp))
            coords.append(e.value)
        elif e == Const(0) and n == 1:
            coords.append(None)
        else:
            return None
    if len(used) != len(loops):
        return None  # a loop around the store that no subscript follows would write elements repeatedly
    return Producer(k, buffer, store, coords)


def inline_producer(consumer: Operation, producer: Producer) -> None:
    """Replace every load of the producer's buffer under `consumer` by the producer's computation of that element.

    Leaves `loop.index` ops for non-trivial subscripts; run `cleanup` to fold them.
    """
    sl = producer.slice()
    for load in [op for op in consumer.walk() if isinstance(op, LoadOp) and op.buffer is producer.buffer]:
        vm: dict[Value, Value] = {}
        for iv, e in zip(producer.coords, load.index_exprs()):
            if iv is None:
                continue
            if isinstance(e, indexing.ValueDim):
                vm[iv] = e.value
            else:
                idx = IndexOp.build(e, loc=load.loc)
                load.parent.insert_before(load, idx)
                vm[iv] = idx.result
        for op in sl:
            load.parent.insert_before(load, op.clone(vm))
        value = vm.get(producer.store.value, producer.store.value)
        load.result.replace_all_uses_with(value)
        load.erase()


def drop_store(producer: Producer) -> None:
    """Remove the producer's store of its buffer and the computation only it needed; an empty kernel goes too."""
    producer.store.erase()
    eliminate_dead(producer.kernel)
    if not any(isinstance(op, StoreOp) for op in producer.kernel.walk()):
        producer.kernel.erase()


# ---- the fusion driver -----------------------------------------------------------------------------------------
@dataclass
class Trial:
    """One candidate fusion, measured: the consumer rewritten (a copy), and the work before and after."""

    producer: Producer
    consumer: KernelOp
    fused: KernelOp  # the consumer with the producer inlined and cleaned up
    last_reader: bool  # the consumer is the buffer's only reader and the buffer is not an output
    work_before: float
    work_after: float
    reduction_work_before: float
    reduction_work_after: float
    tensor_cores_lost: str | None = None  # why the fusion takes a contraction off the tensor cores (`why_lost`)

    def growth(self) -> float:
        """How many times the work of the two kernels the fusion leaves (1.0: the same)."""
        return self.work_after / self.work_before if self.work_before else 1.0

    def describe(self) -> str:
        return f"@{self.producer.kernel.sym_name} into @{self.consumer.sym_name}"


def measure(consumer: KernelOp, producer: Producer, interchange: bool = False) -> Trial:
    """Inline `producer` into a copy of `consumer` and measure. A producer holding a reduction read through
    subscripts that divide a consumer loop's index first has that loop split (`split_loops`) and the band ordered
    as the producer's loops (`follow_producer`); otherwise, with `interchange`, the consumer's free loops its
    subscripts do not depend on move inward, so the inlined reduction can be hoisted out of them (a softmax over a
    leading axis)."""
    fused = consumer.clone()

    def loads() -> list[LoadOp]:
        return [op for op in fused.walk() if isinstance(op, LoadOp) and op.buffer is producer.buffer]

    if producer.has_reduction() and split_loops(fused, loads()):
        follow_producer(fused, producer.store, producer.coords, loads())
    elif interchange and producer.has_reduction():
        reorder_band(fused, depends_on([v for ld in loads() for v in ld.indices], fused))
    inline_producer(fused, producer)
    cleanup(fused)
    last = reader_kernels(producer.buffer) == [consumer] and not is_returned(producer.buffer)
    prod_after, red_prod_after = work(producer.kernel), reduction_work(producer.kernel)
    after = [fused, producer.kernel]
    if last:
        rest = producer.kernel.clone()
        kept = _store_in(rest, producer)
        kept.erase()
        eliminate_dead(rest)
        prod_after = work(rest) if any(isinstance(o, StoreOp) for o in rest.walk()) else 0
        red_prod_after = reduction_work(rest) if prod_after else 0
        after = [fused, rest] if prod_after else [fused]
    lost = why_lost([producer.kernel, consumer], after)
    if last:
        rest.erase()
    return Trial(
        producer,
        consumer,
        fused,
        last,
        work_before=work(producer.kernel) + work(consumer),
        work_after=prod_after + work(fused),
        reduction_work_before=reduction_work(producer.kernel) + reduction_work(consumer),
        reduction_work_after=red_prod_after + reduction_work(fused),
        tensor_cores_lost=lost,
    )


def _store_in(copy: KernelOp, producer: Producer) -> StoreOp:
    """The store in a copy of the producer kernel that corresponds to the producer's store."""
    originals = [op for op in producer.kernel.walk() if isinstance(op, StoreOp)]
    copies = [op for op in copy.walk() if isinstance(op, StoreOp)]
    return copies[originals.index(producer.store)]


def commit(trial: Trial) -> None:
    """Put the fused consumer in place of the consumer; drop the producer's store when no one reads it anymore."""
    old, new = trial.consumer, trial.fused
    old.parent.insert_before(old, new)
    old.erase()
    new.loc = fuse([new.loc, trial.producer.kernel.loc])
    if not reader_kernels(trial.producer.buffer) and not is_returned(trial.producer.buffer):
        drop_store(trial.producer)
        buf = trial.producer.buffer
        if not buf.uses and isinstance(buf.owner, BufferOp):
            buf.owner.erase()


def _kernel_origins(kernel: KernelOp):
    """What names a fused kernel: the origins of the values it stores, then of its reductions (the torch ops
    whose results it writes and whose reductions it runs); the rest of its computation when those say nothing."""
    stores = [op for op in kernel.walk() if isinstance(op, StoreOp)]
    stored = [s.value.owner.loc for s in stores if isinstance(s.value, OpResult)]
    reductions = [op.loc for op in kernel.walk() if isinstance(op, ReduceOp)]
    return fuse([*stored, *reductions] or [op.loc for op in kernel.walk()])


def fuse_producers(
    func: FuncOp,
    refusal: Callable[[Trial], str | None],
    *,
    reductions: bool,
    interchange: bool = False,
    remark: Callable[[Operation, str], None] | None = None,
) -> bool:
    """Pull producers into consumers, last kernel first, unless `refusal` says why not for the measured trial, or
    the fusion would take a contraction off the tensor cores (`tensor_cores.why_lost`: every producer fusion keeps
    them there, whatever it saves).

    Only producers holding reductions are tried when `reductions`, only those without otherwise. A consumer tries
    the buffers it reads, latest producer first, until one is accepted; a producer whose buffer nobody reads any
    more loses its store (and disappears when it has no store left). Sweeps repeat until one changes nothing, so
    the result is a fixpoint (running the pass again does nothing). `remark(consumer, message)` hears each decision.
    """
    changed = False
    while _fuse_sweep(func, refusal, reductions, interchange, remark or (lambda op, msg: None)):
        changed = True  # a fusion can enable one in a kernel already visited
    if changed:
        rename_kernels(func)
    return changed


def rename_kernels(func: FuncOp) -> None:
    """Name every kernel after what it computes, numbering repeats in program order (`k_linear`, `k_linear_1`);
    a kernel whose ops carry no torch origin keeps its name."""
    taken: set[str] = set()
    for k in kernels(func):
        k.attributes["sym_name"] = kernel_name(_kernel_origins(k), k.sym_name, taken)


def _fuse_sweep(func: FuncOp, refusal, reductions: bool, interchange: bool, remark) -> bool:
    changed = False
    for consumer in reversed(kernels(func)):
        while consumer.parent is not None:
            fused = None
            order = {id(k): i for i, k in enumerate(kernels(func))}
            candidates = []
            for buf in consumer.loaded_buffers():
                p = producer_of(buf)
                if p is not None and p.kernel is not consumer and p.has_reduction() == reductions:
                    candidates.append(p)
            gone = updated_states(func, consumer)
            for p in sorted(candidates, key=lambda p: -order[id(p.kernel)]):
                if any(isinstance(op, LoadOp) and op.buffer in gone for op in p.slice()):
                    remark(consumer, f"not fused: {p.kernel.sym_name} reads a state this point has updated")
                    continue
                trial = measure(consumer, p, interchange)
                why = refusal(trial) or trial.tensor_cores_lost
                if why is None:
                    remark(consumer, f"fused {trial.describe()}: work {trial.work_before:g} -> {trial.work_after:g}")
                    fused = trial
                    break
                remark(consumer, f"not fused {trial.describe()}: {why}")
                trial.fused.erase()
            if fused is None:
                break
            commit(fused)
            consumer = fused.fused
            changed = True
    return changed
