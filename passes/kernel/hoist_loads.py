from __future__ import annotations

from irforge.dialects.kernel import dependent_launch as DL
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel.ops.base import BareOp
from irforge.dialects.kernel.types import PtrType

from irforge.ir import Block, Operation, Value
from irforge.pass_manager import Choices, Pass, option
from irforge.types import TensorType, index


class KernelHoistLoads(Pass):
    """Issue each straight-line load of a buffer the kernel never writes as soon as its address is known.

    A load that follows a loop, a barrier or a reduction it does not depend on (RMSNorm's weight and input, read
    again to scale them once the row's statistics are in) waits out their latency before it even starts; ptxas
    does not move a load across a barrier. Within each block of the kernel, such a load moves up, with the pure
    ops computing its address, to just after the last op that defines one of them, never above a
    `kernel.griddepcontrol_wait` (what the launch before writes is only visible after it). Only loads of global
    buffers that nothing in the kernel stores into, atomically updates or copies into are moved, so no value read
    changes; loads inside branches stay where they are. A loop marked for full unrolling (`unroll = 0`, at most
    `MAX_TRIPS` trips of constant bounds) whose body holds such a load, behind a barrier or wait it need not wait
    for (a decode GEMV's weight behind the copy of its input vector into shared memory), is unrolled here (ptxas
    would unroll it anyway), so that each trip's load can move. The registers a thread holds the hoisted values
    in are bounded: at most `max-bytes` of loads move in each block (0: none).

    On TinyLlama-1.1B's decode step (H200) the GEMVs' weight loads ahead of their input's copy take 0.8% off
    (bench/results/hoist_loads-h200-2026-11-28). Loads of weights moved ahead of the wait itself (no kernel writes
    a weight) ran 7% slower there and gave wrong results on the GPU that the simulator did not reproduce: not done.
    """

    name = "kernel-hoist-loads"
    input_level = "kernel"
    max_bytes: int = option(
        128,
        domain=Choices((0, 16, 32, 64, 128)),
        help="most bytes a thread's moved loads may hold in each block (registers kept live from the earlier point)",
    )

    def run(self, op: Operation) -> None:
        sites: dict[int, list[K.LaunchOp]] = {}
        for launch in (o for o in op.walk() if isinstance(o, K.LaunchOp)):
            sites.setdefault(id(launch.callee_op()), []).append(launch)
        for kernel in [o for o in op.walk() if isinstance(o, K.KernelFuncOp)]:
            launches = sites.get(id(kernel))
            if not launches:
                continue  # what its parameters are bound to, and so what they alias, is not known
            read_only = _read_only(kernel, launches)
            moved = _visit(kernel.body, read_only, self.max_bytes) if self.max_bytes else 0
            if moved:
                self.remark(kernel, f"{moved} load(s) issued earlier, ahead of work they do not depend on")


# A loop is unrolled for its loads to move only up to this many trips (the default lowering's unrolled loops over
# a thread's share of a decode GEMV's row take 4).
MAX_TRIPS = 8


def _visit(block: Block, read_only: set[Value], budget: int) -> int:
    """Unroll the block's loops whose loads could then move, move its loads, then do the same in nested blocks."""
    for loop in [o for o in block.ops if isinstance(o, K.ForOp)]:
        if _worth_unrolling(loop, block, read_only):
            _unroll(loop)
    moved = _hoist(block, read_only, budget)
    for op in list(block.ops):
        for region in op.regions:
            for inner in region.blocks:
                moved += _visit(inner, read_only, budget)
    return moved


def _floor(block: Block) -> int:
    """The position in `block` no load may rise above: the wait for the launch before (what it writes is only
    visible after it)."""
    return max((i for i, o in enumerate(block.ops) if isinstance(o, DL.GridDepWaitOp)), default=-1)


def _trips(loop: K.ForOp) -> range | None:
    if loop.index_operands:
        return None
    (lo,), (hi,) = loop.attributes["lower"].evaluate(()), loop.attributes["upper"].evaluate(())
    return range(lo, hi, loop.attributes["step"])


def _worth_unrolling(loop: K.ForOp, block: Block, read_only: set[Value]) -> bool:
    """A fully unrolled loop of a few constant trips with a load of a read-only buffer at the top of its body
    whose address the trip and the values before the loop give, behind a barrier, wait or loop of `block`."""
    trips = _trips(loop)
    if loop.attributes.get("unroll") != 0 or trips is None or not 0 < len(trips) <= MAX_TRIPS:
        return False
    at = block.ops.index(loop)
    for load in (o for o in loop.body.ops if isinstance(o, K.LoadOp) and o.mem in read_only):
        chain = _address_chain(load, loop.body)
        if chain is None:
            continue
        outer = [v for c in chain for v in c.operands if v.owner not in chain and v is not loop.induction_var]
        start = _earliest(outer, block, _floor(block))
        if any(_holds_back(o) for o in block.ops[start:at]):
            return True
    return False


def _earliest(values: list[Value], block: Block, floor: int) -> int:
    """The first position in `block` past `floor` where `values` can all be had, the pure ops of `block` computing
    them moved along."""
    ops = block.ops
    pos = floor
    todo, seen = list(values), set()
    while todo:
        owner = todo.pop().owner
        if not isinstance(owner, Operation) or owner.parent is not block or owner in seen:
            continue
        seen.add(owner)
        if _pure(owner):
            todo.extend(owner.operands)
        else:
            pos = max(pos, ops.index(owner))
    return pos + 1


def _unroll(loop: K.ForOp) -> None:
    """Replace the loop by its trips' bodies in order, each with its trip's index and the carries before it."""
    block = loop.parent
    values = list(loop.inits)
    for t in _trips(loop):
        trip = K.ConstOp((), [index], {"value": t})
        block.insert_before(loop, trip)
        vm = {loop.induction_var: trip.result, **dict(zip(loop.carries, values))}
        term = loop.body.terminator  # a loop that carries nothing may have none
        for op in loop.body.ops if term is None else loop.body.ops[:-1]:
            block.insert_before(loop, op.clone(vm))
        values = [vm.get(v, v) for v in term.operands] if term is not None else []
    for r, v in zip(loop.results, values):
        r.replace_all_uses_with(v)
    loop.erase()


def _read_only(kernel: K.KernelFuncOp, launches: list[K.LaunchOp]) -> set[Value]:
    """The kernel's pointer parameters that it only reads (loads, L2 prefetches, cp.async sources) and that no
    launch binds to a buffer another parameter also reaches (the same buffer or a view of it)."""
    params = {a for a in kernel.body.args if isinstance(a.type, PtrType)}
    for launch in launches:
        roots = [_root(v) for v in launch.args]
        params -= {a for a, r in zip(kernel.body.args, roots) if roots.count(r) > 1}
    for o in kernel.walk():
        for i, v in enumerate(o.operands):
            if v not in params:
                continue
            reads = (isinstance(o, (K.LoadOp, DL.PrefetchL2Op)) and v is o.mem) or (
                isinstance(o, K.CpAsyncOp) and i == 0
            )
            if not reads:
                params.discard(v)
    return params


def _root(v: Value) -> Value:
    while isinstance(v.owner, K.ViewOp):
        v = v.owner.operands[0]
    return v


def _hoist(block: Block, read_only: set[Value], budget: int) -> int:
    """Move the block's eligible loads (and their address ops) up; the number moved."""
    hoisted: list[K.LoadOp] = []
    for load in [o for o in block.ops if isinstance(o, K.LoadOp) and o.mem in read_only]:
        t = load.result.type
        nbytes = t.numel * t.dtype.bytes if isinstance(t, TensorType) else t.bytes
        chain = _address_chain(load, block)
        if nbytes > budget or chain is None:
            continue
        ops = block.ops
        floor = _floor(block)
        behind = ops.index(hoisted[-1]) if hoisted else -1  # the loads moved before it keep their order
        target = max([floor, behind, *(_def_index(v, block, chain) for c in chain for v in c.operands)]) + 1
        if not any(_holds_back(o) for o in ops[target : ops.index(load)] if o not in chain):
            continue  # nothing ptxas would not move it across itself
        for c in [c for c in chain if ops.index(c) >= target]:
            block.insert(target, c.detach())
            target += 1
        budget -= nbytes
        hoisted.append(load)
    return len(hoisted)


def _address_chain(load: K.LoadOp, block: Block) -> list[Operation] | None:
    """The load and the ops of `block` computing its operands, in block order; None when one of those ops is not
    pure (its value may depend on where it runs)."""
    chain, todo = {load}, list(load.operands)
    while todo:
        v = todo.pop()
        owner = v.owner
        if not isinstance(owner, Operation) or owner.parent is not block or owner in chain:
            continue
        if not _pure(owner):
            return None
        chain.add(owner)
        todo.extend(owner.operands)
    return [o for o in block.ops if o in chain]


def _pure(op: Operation) -> bool:
    return op.has_trait("pure") and not op.regions and not isinstance(op, K.ShuffleOp)


def _holds_back(op: Operation) -> bool:
    """Whether ptxas keeps a later load behind `op`: a loop or branch, a barrier, a wait, a fence (not the signal
    that lets the next launch start, which waits for nothing)."""
    signal = isinstance(op, DL.GridDepLaunchDependentsOp)
    return bool(op.regions) or (isinstance(op, (BareOp, K.MbarrierWaitOp)) and not signal)


def _def_index(v: Value, block: Block, chain: list[Operation]) -> int:
    """The position in `block` of the op defining `v` (-1 when it is defined outside the block or moves with the
    chain)."""
    owner = v.owner
    if not isinstance(owner, Operation) or owner.parent is not block or owner in chain:
        return -1
    return block.ops.index(owner)
