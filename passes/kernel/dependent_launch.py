from __future__ import annotations

from irforge.dialects.kernel import dependent_launch as DL
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel.builder import KernelBuilder, Val
from irforge.dialects.kernel.types import PtrType

from irforge import index_expr as ix
from irforge.ir import Block, Operation, Value
from irforge.pass_manager import Choices, Pass, option
from irforge.target import target
from irforge.types import TensorType, index


class KernelDependentLaunch(Pass):
    """Start each kernel while the launch before it drains (sm_90 programmatic dependent launch), optionally
    prefetching its weights into L2 meanwhile.

    A kernel's launch and its blocks' start-up cost about a microsecond that a program of short kernels (a decode
    step: a few hundred of a few microseconds each) pays at every boundary. Each launched kernel gets, at the top
    of its body: with `prefetch-l2-share` above 0, the block's share of every weight it takes (a pointer parameter
    bound to a `kernel.param` at every launch) asked into L2 by one thread (`kernel.prefetch_l2`: the blocks
    together cover the weight, up to that share of the L2 per kernel); then `kernel.griddepcontrol_wait` (the
    launch before it has completed, its writes visible) and `kernel.griddepcontrol_launch_dependents` (the next
    kernel may start). Nothing is read or written before the wait except those prefetches, which change no value;
    the runtime launches such kernels with programmatic stream serialization. A kernel that already waits is left
    alone (idempotent); before sm_90 the pass does nothing. On an H100 it takes 1% off a TinyLlama decode step and
    most from split-K products, whose zeroing kernel it overlaps (bench/results/dependent_launch-h100-2026-11-26).
    A buffer the kernel gathers from (addressed with values it loaded: an embedding table) is no weight.

    The pass prefetches nothing unless asked; the default lowering (pipelines/tile-to-kernel.pipeline) asks for
    `prefetch-l2-share=0.5 prefetch-when=idle`. Prefetching helps a kernel whose launch before leaves the memory
    idle (the o projection after attention) but costs more where the launch before streams (the down projection's,
    issued while gate/up streams) or is a short kernel it floods (gate/up's, behind the norm before it): TinyLlama
    bf16 decode 1.103 ms a step with every kernel's at 0.5, 1.077 without (bench/results/decode-h100-2026-11-26).
    `prefetch-when=idle` keeps it to what the launch before leaves time for (`IDLE_LAUNCH_S` at the DRAM's rate,
    less that launch's bytes, and `DRAIN_S`'s worth behind one that streams; none behind a block's first launch):
    on an H200, 1.5-2.1% off the same step (0.5 share) in four interleaved runs without the drain's, where every
    kernel's prefetch cost 6% and a 2 us window 1%, and neutral on the llm suite
    (bench/results/decode_prefetch-h200-2026-11-28); the drain's 1.4% more, 0.5-1.6% on noisier machines
    (decode_drain-h200-2026-11-28).
    """

    name = "kernel-dependent-launch"
    input_level = "kernel"
    prefetch_l2_share: float = option(
        0.0,
        domain=Choices((0.0, 0.25, 0.5, 1.0)),
        help="most of the L2 one kernel's weight prefetch may fill, as a fraction (0: no prefetch)",
    )
    prefetch_when: str = option(
        "always",
        domain=Choices(("always", "idle")),
        help="which kernels prefetch: always; idle: behind a launch that leaves the memory idle, as much as it "
        "leaves time for",
    )

    def run(self, op: Operation) -> None:
        if target().sm < 90:
            self.remark(op, f"{target().arch} has no programmatic dependent launch (sm_90 and later have it)")
            return
        sites: dict[int, list[K.LaunchOp]] = {}
        for launch in (o for o in op.walk() if isinstance(o, K.LaunchOp)):
            sites.setdefault(id(launch.callee_op()), []).append(launch)
        for kernel in [o for o in op.walk() if isinstance(o, K.KernelFuncOp)]:
            launches = sites.get(id(kernel))
            if not launches or any(isinstance(o, DL.GridDepWaitOp) for o in kernel.body.ops):
                continue
            weights = _weights(kernel, launches)
            budget = self.prefetch_l2_share * target().l2_bytes
            if self.prefetch_when == "idle":
                budget = min(budget, min(_idle_bytes(launch) for launch in launches))
            share = min(1.0, budget / sum(weights.values())) if weights and budget else 0.0
            _add_prologue(kernel, weights if share else {}, share)
            what = f", prefetching {share:.0%} of {sum(weights.values())} weight bytes into L2" if share else ""
            self.remark(kernel, f"launched as a dependent of the launch before it{what}")


# A launch that moves little still takes about this long (its launch, its first loads' latency, its stores; in a
# CUDA graph under dependent launch): the time the memory idles behind it, which the next kernel's prefetch fills.
# TinyLlama's decode step on an H200: 3 us (10 MB: the o and q/k projections' weights whole) ran best, 2 us slower
# than no prefetch (bench/results/decode_prefetch-h200-2026-11-28).
IDLE_LAUNCH_S = 3e-6
# A launch that streams leaves the memory idle too, about this long as it drains (its last loads and stores, the
# dependency's release, the next kernel's first loads' latency). The same step: 1 us took 1.4% off beside idle
# launches alone (the down projection behind gate/up most), 2 us 0.3% (bench/results/decode_drain-h200-2026-11-28).
DRAIN_S = 1e-6


def _idle_bytes(launch: K.LaunchOp) -> int:
    """What the memory could move while the launch before `launch` runs and leaves it idle: `IDLE_LAUNCH_S` at
    the DRAM's rate less the bytes of that launch's buffers, and `DRAIN_S` at that rate at least; 0 where `launch`
    is its block's first (the launch before it is not known)."""
    ops = launch.parent.ops
    before = [o for o in ops[: ops.index(launch)] if isinstance(o, K.LaunchOp)]
    if not before:
        return 0
    moved = sum(v.type.numel * v.type.dtype.bytes for v in set(before[-1].args) if isinstance(v.type, TensorType))
    rate = target().dram_bytes_per_s
    return max(int(DRAIN_S * rate), int(IDLE_LAUNCH_S * rate) - moved)


def _weights(kernel: K.KernelFuncOp, launches: list[K.LaunchOp]) -> dict[int, int]:
    """Bytes of each pointer parameter bound to the same-sized `kernel.param` at every launch, by position; not one
    the kernel gathers from (an embedding table: it reads a few rows, not the whole)."""
    out = {}
    for i, t in enumerate(kernel.attributes["function_type"].inputs):
        if not isinstance(t, PtrType) or _gathered(kernel, kernel.body.args[i]):
            continue
        sizes = set()
        for launch in launches:
            v = launch.args[i]
            if not isinstance(v.owner, K.ParamOp):
                break
            sizes.add(v.type.numel * v.type.dtype.bytes)
        else:
            if len(sizes) == 1:
                out[i] = sizes.pop()
    return out


def _add_prologue(kernel: K.KernelFuncOp, weights: dict[int, int], share: float) -> None:
    body = kernel.body
    kb = KernelBuilder(Block(), kernel.loc)
    if weights:
        grid, block = kernel.attributes["grid"], kernel.attributes["block"]
        first = kb.scalar("eq", _linear(kb, block, kb.thread_id), kb.const(0, index))
        blk = _linear(kb, grid, kb.block_id)
        blocks = grid[0] * grid[1] * grid[2]
        with kb.if_(first) as guard, guard.then():
            for i, nbytes in weights.items():
                arg = body.args[i]
                units = nbytes // 16  # 16-byte pieces: the prefetch's granule (a ragged tail is left out)
                if not units:
                    continue
                per = -(-units // blocks)  # each block's share, so the blocks cover the weight
                take = max(1, round(per * share))
                covering = -(-units // per)
                last = units - (covering - 1) * per  # the last covering block's share may be short
                size = take * 16 if take <= last else ix.minimum(units - Val(blk) * per, take) * 16
                start = Val(blk) * (per * 16 // arg.type.dtype.bytes)
                if covering == blocks:
                    kb.prefetch_l2(arg, start, size)
                    continue
                with kb.if_(kb.scalar("lt", blk, kb.const(covering, index))) as part, part.then():
                    kb.prefetch_l2(arg, start, size)
    kb.griddepcontrol_wait()
    kb.griddepcontrol_launch_dependents()
    for k, new in enumerate(list(kb.block.ops)):
        body.insert(k, new.detach())


def _linear(kb: KernelBuilder, dims, axis) -> Value:
    """The linear id (x fastest) of a thread in its block or a block in its grid, over the dimensions above 1."""
    expr, scale = 0, 1
    for d, n in zip("xyz", dims):
        if n > 1:
            expr = Val(axis(d)) * scale + expr
            scale *= n
    return kb.index(expr)


def _gathered(kernel: K.KernelFuncOp, ptr: Value) -> bool:
    """Whether the kernel addresses `ptr` with values it loaded (the rows a gather's indices pick)."""
    for op in kernel.walk():
        if op.operands and op.operands[0] is ptr and any(_loaded(v) for v in op.operands[1:]):
            return True
    return False


def _loaded(v: Value) -> bool:
    todo, seen = [v], set()
    while todo:
        x = todo.pop()
        owner = x.owner if isinstance(x.owner, Operation) else None
        if owner is None or id(owner) in seen:
            continue
        seen.add(id(owner))
        if isinstance(owner, K.LoadOp):
            return True
        todo.extend(owner.operands)
    return False
