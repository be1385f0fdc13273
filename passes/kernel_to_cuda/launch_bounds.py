"""kernel-to-cuda's `__launch_bounds__` of a kernel: one block a multiprocessor where a thread holds a large
register tile or tensor-core fragments, none where a loop needs more than half a thread's registers at full
occupancy, else the block's threads alone."""

from __future__ import annotations

from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel import warpgroup as WG
from irforge.dialects.kernel.types import FragType

from irforge.target import target
from irforge.types import TensorType

from .c_text import _numel

# A thread carrying a register tile this large (a SIMT contraction's 8 x 8 accumulators), or computing on tensor-core
# fragments, is told one block a multiprocessor suffices: ptxas otherwise holds such a kernel under a register
# target of its own for occupancy the schedule does not plan on, and spills (a 32 x 32 x 64 f32 product: 168
# registers and 36 spill stores under a bare bound; a 32 x 128 x 2048 f16 split-K product on mma: 72 and 4).
REGISTER_TILE_ELEMENTS = 64


def _registers(t) -> int:
    """32-bit registers a value of type `t` takes (two f16/bf16 elements share one)."""
    if isinstance(t, TensorType):
        return max(1, t.numel * t.dtype.bits // 32)
    return _numel(t)


def _full_occupancy_registers(threads: int) -> int:
    """Registers a thread has when a multiprocessor holds as many blocks of `threads` as its thread and block
    limits allow (32 for 64 to 1024 threads)."""
    t = target()
    lanes = -(-threads // t.warp_size) * t.warp_size
    blocks = min(t.max_blocks_per_sm, t.max_threads_per_sm // lanes)
    return min(t.max_registers_per_thread, t.registers_per_sm // (blocks * lanes))


def _launch_bounds(k, fragments: bool) -> str:
    """The kernel's `__launch_bounds__(...)` attribute, or none.

    `(threads, 1)`, one block a multiprocessor, where a thread carries a register tile of REGISTER_TILE_ELEMENTS or
    more, holds tensor-core fragments (`fragments`) or sets its warpgroups' register counts. Else a bare
    `(threads)`: ptxas picks a register target for occupancy (memory-bound kernels keep its choice). Except where a
    loop's carries and one step's loads take more than half a thread's registers at full occupancy (the rest goes to
    addresses and indices): that thread cannot run at full occupancy, and ptxas' target lands a step below what the
    loop holds and spills (f32 (x [2, 7, 100] * 0.5) @ wᵀ [2, 512, 100] + r: 224 threads carrying 4 accumulators,
    loading 20 values a step: 56 registers, 8 bytes spilled). A minimum of blocks spills there too (ptxas fills the
    registers it is given, unrolling: 80 and 128 registers spilled). No bound: ptxas takes what the loop needs (60).
    Only for blocks of up to 256 threads, whose threads' most registers fit the register file: the bound says
    nothing else there."""
    t = target()
    one_block, unbounded = fragments, False
    for op in k.walk():
        if one_block:
            break
        if isinstance(op, WG.SetMaxRegistersOp):  # the counts split one block's register file
            one_block = True
        elif isinstance(op, K.ForOp) and op.carries:
            one_block = any(
                isinstance(c.type, TensorType) and _numel(c.type) >= REGISTER_TILE_ELEMENTS for c in op.carries
            )
            held = sum(_registers(c.type) for c in op.carries)
            held += sum(_registers(o.result.type) for o in op.walk() if isinstance(o, K.LoadOp))
            unbounded |= 2 * held > _full_occupancy_registers(k.threads)
    if one_block:
        return f"__launch_bounds__({k.threads}, 1) "
    lanes = -(-k.threads // t.warp_size) * t.warp_size
    if unbounded and lanes * t.max_registers_per_thread <= t.registers_per_sm:
        return ""
    return f"__launch_bounds__({k.threads}) "


def _holds_fragments(k) -> bool:
    """Whether the kernel computes on tensor-core fragments."""
    return any(isinstance(r.type, FragType) for op in k.walk() for r in op.results)
