"""The analytic cost model that orders the search's unvisited children: a schedule's time from what it moves and
computes, and how well its launch fills the GPU.

`features(module)` reads a tile-level schedule (the kernels of an isolated program) into counts:

- bytes through L1/L2 (loads of function buffers and staged boxes, as often as threads issue them), shared-memory
  bytes (loads of staged copies; a tensor-core contraction's slabs once each), bytes the program must move from
  DRAM (each buffer once), FLOPs: on the CUDA cores, and per tensor-core family those of the reductions in a loop
  laid out on an atom (`tile-tensorize`);
- how often an op runs: the product of its loops' extents, except that a loop vectorized along a dimension the op
  does not depend on runs it once per work item (a thread's 8 x 8 register tile loads a column of A 8 times, not
  64), times the threads that run it redundantly (launch axes no enclosing loop is distributed over);
- the launch (blocks, threads), shared memory per block, and an estimate of registers per thread (register-tile
  accumulators and operand fragments), replaced by the CUBIN's count once the candidate is compiled.

`seconds(f)` turns them into a time: the largest of DRAM, L2, shared-memory, FMA and tensor-core time, each at the
rate the target gives, slowed by latency the resident warps cannot hide (occupancy: blocks per multiprocessor from
threads, registers and shared memory), by multiprocessors left idle and by wave quantization, plus the launch. It
is a prior: it orders siblings, and the search trusts it more (PUCT) only where its ranking agrees with measurements.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass, replace

from irforge.dialects import tile as T
from irforge.ir import Operation
from irforge.target import Target, target

_FREE_OPS = {"scalar.const", "scalar.cast"}  # no arithmetic at run time (or folded into an address)


@dataclass(frozen=True)
class Features:
    kernels: int
    blocks: int
    threads: int
    smem: int  # bytes of shared memory per block
    registers: int  # per thread (estimated until the CUBIN counts them)
    dram_bytes: int
    global_bytes: float
    smem_bytes: float
    flops: float
    accumulators: int  # independent accumulators per thread (instruction-level parallelism)
    in_flight: int  # bytes a block's loads and copies have on their way at once (memory-level parallelism)
    tensor_flops: tuple[tuple[str, float], ...] = ()  # (atom family, FLOPs) of contractions on the tensor cores

    def with_compiled(self, registers: int, smem: int) -> Features:
        """The features once the CUBIN has counted registers and shared memory."""
        return replace(self, registers=registers, smem=max(smem, self.smem))


def features(module: Operation) -> Features | None:
    """The counts of a tile-level program (None when it has no tile kernels yet)."""
    kernels = [op for op in module.walk() if isinstance(op, T.KernelOp)]
    if not kernels:
        return None
    main = max(kernels, key=lambda k: k.threads * math.prod(k.attributes["grid"]))
    parts = [_count(k) for k in kernels]
    return Features(
        kernels=len(kernels),
        blocks=math.prod(main.attributes["grid"]),
        threads=main.threads,
        smem=max(p["smem"] for p in parts),
        registers=max(p["registers"] for p in parts),
        dram_bytes=sum(_buffer_bytes(k) for k in kernels),
        global_bytes=sum(p["global"] for p in parts),
        smem_bytes=sum(p["shared"] for p in parts),
        flops=sum(p["flops"] for p in parts),
        accumulators=max(p["accumulators"] for p in parts),
        in_flight=max(p["in_flight"] for p in parts),
        tensor_flops=tuple(
            sorted(sum((collections.Counter(p["tensor"]) for p in parts), collections.Counter()).items())
        ),
    )


def _buffer_bytes(k: T.KernelOp) -> int:
    return sum(math.prod(v.type.shape) * v.type.dtype.bytes for v in [*k.read_buffers(), *k.stored_buffers()])


def _count(kernel: T.KernelOp) -> dict:
    deps: dict = {}  # value -> the (loop, dimension) indices it depends on
    out = dict(global_=0.0, shared=0.0, flops=0.0, smem=0, accumulators=1, fragments=0, in_flight=0)
    tensor: collections.Counter = collections.Counter()
    split_k = any(isinstance(c, T.CombineOp) and set(c.over) & set(T.BLOCK_AXES) for c in kernel.walk())

    def on_atom(op: Operation) -> str | None:
        """The tensor-core family computing `op`: a reduction (or an op in one) inside a loop laid out on an atom."""
        loops = T.enclosing_loops(op)
        atom = next((lp.attributes["atom"] for lp in loops if "atom" in lp.attributes), None)
        inside = isinstance(op, T.ReduceOp) or any(isinstance(lp, T.ReduceOp) for lp in loops)
        return atom.split(".")[0] if atom is not None and inside else None

    def count_flops(op: Operation, n: float) -> None:
        family = on_atom(op)
        if family is not None:
            tensor[family] += n
        else:
            out["flops"] += n

    def dep_of(values) -> frozenset:
        return frozenset().union(*(deps.get(v, frozenset()) for v in values))

    def visit(op: Operation) -> None:
        if isinstance(op, T.LoopOp):
            for d, iv in enumerate(op.ivs):
                deps[iv] = frozenset({(op, d)})
            for inner in op.body.ops:
                visit(inner)
            if isinstance(op, T.ReduceOp):
                yielded = op.body.ops[-1].operands if op.body.ops else ()
                mine = {(op, d) for d in range(len(op.extents))}
                d = dep_of(yielded) - mine
                for r in op.results:
                    deps[r] = d
                tile = _widths_along(op, d)
                out["accumulators"] = max(out["accumulators"], len(op.results) * tile)
                if op.body.ops:  # the fold of each element into its carrier
                    count_flops(op, len(op.results) * _runs(op.body.ops[-1], dep_of(yielded), kernel, "threads"))
            return
        d = dep_of(op.operands)
        for r in op.results:
            deps[r] = d
        if isinstance(op, T.StageOp):
            box = math.prod(op.box) * op.result.type.dtype.bytes
            out["global_"] += box * _runs(op, d, kernel, "blocks")
            out["smem"] += box * op.ring
            out["in_flight"] += box * (1 + op.prefetch)
            if on_atom(op):  # the atoms' instructions read each slab about once, not a thread's elements each
                out["shared"] += box * _runs(op, d, kernel, "blocks")
        elif isinstance(op, T.LoadOp):
            width = _widths_along(op, d)
            nbytes = op.result.type.bytes
            moved = nbytes * _runs(op, d, kernel, "threads")
            if _staged(op.operands[0]):
                out["shared"] += 0 if on_atom(op) else moved
            else:
                out["global_"] += moved
                out["in_flight"] += nbytes * width * kernel.threads
            out["fragments"] += width
        elif isinstance(op, T.StoreOp):
            value = op.operands[-1]
            nbytes = value.type.bytes
            out["global_"] += nbytes * _runs(op, d | deps.get(value, frozenset()), kernel, "split" if split_k else "")
        elif op.dialect == "scalar" and op.name not in _FREE_OPS:
            count_flops(op, _runs(op, d, kernel, "threads"))
        for region in op.regions:
            for block in region.blocks:
                for inner in block.ops:
                    visit(inner)

    for op in kernel.body.ops:
        visit(op)
    registers = min(255, 24 + out["accumulators"] + out["fragments"])
    return {
        "global": out["global_"],
        "shared": out["shared"],
        "flops": out["flops"],
        "tensor": tensor,
        "smem": out["smem"],
        "registers": registers,
        "accumulators": out["accumulators"],
        "in_flight": out["in_flight"],
    }


def _staged(v) -> bool:
    from irforge.ir import OpResult

    return isinstance(v, OpResult) and isinstance(v.op, T.StageOp)


def _widths_along(op: Operation, deps: frozenset) -> int:
    """Elements per work item of `op`: the vector widths of its enclosing loops along the dimensions it depends
    on (the register tile it computes at once)."""
    n = 1
    for lp in T.enclosing_loops(op):
        for d, w in enumerate(lp.vector_shape):
            if (lp, d) in deps:
                n *= w
    return n


def _runs(op: Operation, deps: frozenset, kernel: T.KernelOp, replicated: str) -> float:
    """Element evaluations of `op` over the whole launch: its loops' iterations (once per work item along a
    vectorized dimension it does not depend on), times the threads (or blocks) that run it redundantly. A block's
    collective op (`replicated="blocks"`: a stage) runs once per trip of the block's threads through a loop on
    thread axes, not once per work item."""
    n = 1.0
    bound = set()
    for lp in T.enclosing_loops(op):
        bound.update(lp.bind)
        if replicated == "blocks" and set(lp.bind) & set(T.THREAD_AXES):
            n *= -(-lp.work_items // lp.units(kernel))
            n *= math.prod(kernel.axis_size(a) for a in lp.bind if a in T.BLOCK_AXES)
            continue
        for d, (e, w) in enumerate(zip(lp.extents, lp.vector_shape)):
            n *= e if (lp, d) in deps else e // max(w, 1)
    axes = {"threads": T.AXES, "blocks": T.BLOCK_AXES, "split": T.BLOCK_AXES}.get(replicated, ())
    for a in axes:
        if a not in bound:
            n *= kernel.axis_size(a)
    return n


def seconds(f: Features, t: Target | None = None) -> float:
    """The predicted time of a schedule (infinite when a block cannot be resident at all)."""
    t = t or target()
    warps = -(-f.threads // t.warp_size)
    per_sm = _blocks_per_sm(f, warps, t)
    if per_sm == 0:
        return math.inf
    resident = min(per_sm, -(-f.blocks // t.sm_count))
    active_warps = resident * warps
    used = min(t.sm_count, f.blocks) / t.sm_count
    capacity = per_sm * t.sm_count
    waves = -(-f.blocks // capacity)
    quantization = waves * capacity / f.blocks if waves > 1 else 1.0
    # Little's law: the bytes a multiprocessor must have in flight to cover DRAM latency at its share of bandwidth
    needed = t.dram_bytes_per_s / t.sm_count * t.memory_latency_s
    memory_efficiency = min(1.0, max(resident * f.in_flight, 1) / needed)
    # four schedulers, each keeping four independent FMAs in flight
    compute_efficiency = min(1.0, active_warps * min(f.accumulators, 8) / 16) * f.threads / (warps * t.warp_size)
    busy = max(
        f.dram_bytes / t.dram_bytes_per_s / memory_efficiency,
        f.global_bytes / t.l2_bytes_per_s / memory_efficiency,
        f.smem_bytes / (t.smem_bytes_per_clock * t.clock_hz * t.sm_count),
        f.flops / t.fp32_flops_per_s / max(compute_efficiency, 1e-3),
        sum(n / t.atom_rate(family) for family, n in f.tensor_flops),
    )
    return busy / used * quantization + f.kernels * t.launch_s


def _blocks_per_sm(f: Features, warps: int, t: Target) -> int:
    limits = [t.max_blocks_per_sm, t.max_threads_per_sm // (warps * t.warp_size)]
    regs = -(-max(f.registers, 1) // 8) * 8 * warps * t.warp_size
    limits.append(t.registers_per_sm // regs)
    if f.smem:
        limits.append(t.smem_per_sm // f.smem)
    return max(0, min(limits))
