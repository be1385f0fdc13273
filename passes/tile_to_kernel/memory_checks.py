"""What the memory rules cannot materialize, and what a kernel's stages ask of it (producer, parameters)."""

from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.kernel import warpgroup as WG
from irforge.dialects.kernel.types import PtrType, TensorMapType, tma_swizzle
from irforge.dialects.tile import vectors

from irforge.ir import Operation, Value
from irforge.target import target

from .memory_smem import slot_type


# ---- what cannot be materialized -----------------------------------------------------------------------------------
def why_not(kernel: T.KernelOp, op: Operation) -> str | None:
    if not isinstance(op, T.StageOp):
        return None
    if not op.box:
        return "stages a rank-0 buffer; load it directly"
    for lp in T.enclosing_loops(op):
        if any(a in T.THREAD_AXES for a in lp.bind) and set(op.indices) & vectors.depends(lp, lp.ivs):
            return (
                f"stages a box that moves with the block's threads (its subscript uses the index of a loop "
                f"distributed over {', '.join(lp.bind)}); the block's threads copy one box together"
            )
    if op.copy == "async":
        if not target().has("cp.async"):
            return f"copies asynchronously, which {target().arch} cannot (cp.async needs sm_80)"
        if op.copy_width() * op.result.type.dtype.bytes < 4:
            return "copies asynchronously, but its rows do not split into aligned 4-, 8- or 16-byte pieces"
    if op.copy == "tma":
        why = why_not_tma(op)
        if why:
            return why
    if "columns" in op.attributes:
        from .tensor_cores import read_through_descriptors  # here: tensor_cores imports this module

        if op.copy != "tma" or not read_through_descriptors(kernel, op):
            return (
                f"is stored in blocks of {op.columns} columns, which only the tensor memory accelerator writes and "
                "only wgmma's descriptors read (every load of it a factor of a wgmma)"
            )
    if op.ring > 1 or op.prefetch:
        why = op.why_not_ring()
        if why:
            return why
    if op.prefetch:
        return op.why_not_prefetch()
    if op.producer:
        return why_not_producer(op)
    return None


def tensormap_type(op: T.StageOp) -> TensorMapType:
    """The tensor map a `tma` stage copies its box with, a block of its columns at a time (raises ValueError
    where the copy engine cannot)."""
    dtype = op.result.type.dtype
    box = (*op.box[:-1], op.columns)
    span = op.columns * dtype.bytes if op.attributes.get("swizzle") else 0
    return TensorMapType(dtype, op.source.type.shape, box, span)


def why_not_tma(op: T.StageOp) -> str | None:
    """Why the tensor memory accelerator cannot copy the stage (None when it can): the target has none, the box is
    no tensor map's (at most 256 elements a dimension, rank 5, rows of 16-byte multiples), the shared copy is
    padded or swizzled otherwise than the copy engine writes, a ring's slots are not aligned for it, or a loop
    around the stage other than its own makes several trips (its mbarriers' phases count the stage's trips in
    one run of its loop)."""
    if not target().has("tma"):
        return f"is copied by the tensor memory accelerator, which {target().arch} lacks (sm_90 and later have it)"
    if op.attributes.get("pad"):
        return "has padded rows, which the tensor memory accelerator does not write (it writes the box densely)"
    try:
        tm = tensormap_type(op)
    except ValueError as e:
        return f"is not a box the tensor memory accelerator copies: {e}"
    sw = tuple(op.attributes.get("swizzle", ()))
    if sw and sw != tma_swizzle(tm.swizzle, tm.dtype):
        want = ", ".join(map(str, tma_swizzle(tm.swizzle, tm.dtype)))
        return (
            f"is swizzled otherwise than the tensor memory accelerator writes {tm.swizzle}-byte rows (swizzle({want}))"
        )
    slot = slot_type(op)
    if op.ring > 1 and slot.nbytes % slot.align:
        return f"has {slot.nbytes}-byte slots; the tensor memory accelerator needs each at a multiple of {slot.align}"
    kernel = T.kernel_of(op)
    for lp in T.enclosing_loops(op):
        persistent = op.producer and lp.bind and set(lp.bind) <= set(T.BLOCK_AXES)  # over tiles: `ring_trip`
        if lp.work_items > lp.units(kernel) and (lp is not op.parent_op or lp.bind) and not persistent:
            return (
                "is copied by the tensor memory accelerator inside a loop whose threads make several trips; its "
                "mbarriers count the trips of one run of the stage's own loop"
            )
    return None


def why_not_producer(op: T.StageOp) -> str | None:
    """Why a producer warp cannot issue the stage's copies (None when it can): the stage must sit directly in an
    undistributed loop, the block must be whole warps along x with room for one more, every stage of the kernel
    must be a producer stage of that loop with one ring, no combine may cross the block's threads (the producer
    warp reaches none of their barriers) or go through a cluster (which places the block's own threads' carriers
    only), and every loop around the stage's loop must make one trip a thread
    (each of the block's threads releases every slot; the producer takes the block's own units)."""
    why = op.why_not_ring()
    if why:
        return why
    kernel, loop, warp = T.kernel_of(op), op.parent_op, target().warp_size
    if kernel.axis_size("threadIdx.y") * kernel.axis_size("threadIdx.z") != 1 or kernel.threads % warp:
        return "is copied by a producer warp, which joins a block of whole warps along x alone"
    if kernel.threads + warp > target().max_threads:
        return f"is copied by a producer warp, for which a block of {kernel.threads} threads has no room"
    for other in kernel.walk():
        ours = isinstance(other, T.StageOp) and other.producer and other.parent_op is loop and other.ring == op.ring
        if isinstance(other, T.StageOp) and not ours:
            return "is copied by a producer warp, but the kernel has other stages (their barriers need every warp)"
        if isinstance(other, T.CombineOp) and other.over[0] in T.THREAD_AXES:
            return "is copied by a producer warp, but the kernel combines across its threads (no barrier for the warp)"
        if isinstance(other, T.CombineOp) and other.attributes.get("via") == "cluster":
            return (
                "is copied by a producer warp, but the kernel combines through a cluster (of the block's own threads)"
            )
    for lp in T.enclosing_loops(loop):
        threads = [a for a in lp.bind if a in T.THREAD_AXES]
        if threads and (len(threads) != len(lp.bind) or not lp.one_item_a_unit(kernel)):
            return "is copied by a producer warp, inside a loop whose threads do not each take one work item"
        if not lp.bind and lp.work_items > 1:
            return "is copied by a producer warp, inside a loop around its own that makes several trips"
    return None


def producer_stages(tk: T.KernelOp) -> list[T.StageOp]:
    """The stages a producer warp copies (all of the kernel's or none: `why_not_producer`)."""
    return [op for op in tk.walk() if isinstance(op, T.StageOp) and op.producer]


def producer_registers(tk: T.KernelOp) -> tuple[int, int] | None:
    """(producer, consumer) registers per thread where the producer is a warpgroup that gives its registers to the
    block's threads (`kernel.setmaxnreg`, sm_90a, a block of whole warpgroups that gains by it); None: a warp."""
    if not target().has("wgmma") or tk.threads % WG.WARPGROUP:
        return None
    return WG.register_split(tk.threads)


def params(tk: T.KernelOp) -> list[tuple[Value, object]]:
    """The kernel's parameters: (buffer, type) for each buffer it reads otherwise than through the tensor memory
    accelerator (a `!kernel.ptr`), each tensor map its `tma` stages copy with, each buffer it writes."""
    tma = [op for op in tk.walk() if isinstance(op, T.StageOp) and op.copy == "tma"]
    direct = {op.operands[0] for op in tk.walk() if isinstance(op, (T.LoadOp, T.StageOp)) and op not in tma}
    reads = [(b, PtrType(b.type.dtype)) for b in tk.read_buffers() if b in direct]
    maps = list(dict.fromkeys((op.source, tensormap_type(op)) for op in tma))
    return reads + maps + [(b, PtrType(b.type.dtype)) for b in tk.stored_buffers()]
