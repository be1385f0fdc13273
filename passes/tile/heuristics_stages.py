"""The default schedule of staged inputs: budgets, rings, prefetch, producer warps, persistence, layouts, copies."""

from __future__ import annotations

import math

from irforge.dialects import tile as T
from irforge.dialects.tile import fragments
from irforge.dialects.tile.algebra import contractions_in
from irforge.passes.tile import banks, banks_layouts
from irforge.passes.tile.heuristics_attention import (
    ATTENTION_MMA_BLOCKS_PER_SM,
    DECODE_RING,
    DECODE_RING_BLOCKS_PER_SM,
    DECODE_SLICE_RING,
    _attention_on_atoms,
    _decode_attention,
    _recomputes_a_in,
    _sliced_attention,
)
from irforge.passes.tile.heuristics_contractions import (
    WAVE_RING,
    WGMMA_TILE,
    WGMMA_WIDE_RING,
    _wgmma_columns,
    _wgmma_loops,
)
from irforge.passes.tile.heuristics_splits import _tensorized_tile
from irforge.passes.tile_to_kernel import memory
from irforge.passes.tile_to_kernel.memory import producer_stages

from irforge.target import target

STAGE_BYTES = 32 * 1024  # shared memory a kernel may fill with staged inputs (of the 48 KB static limit)
# A box every block stages alike at its start (a decode GEMV's input vector: the same for all rows) is in L2 once the
# first block has read it, so staging it saves L2 reads only, and its copy and barrier stand before the block's
# first weight load (a chunk's slabs, staged per trip, are copied ahead in rings instead): it is staged only when a
# block reads each element this many times. TinyLlama bf16 decode on an H100, the
# projections' vectors (2 rows a block) read straight from L2: 1.206 -> 1.158 ms a step (the o projection's f32
# input, 4.8 -> 3.4 us; bench/results/decode-h100-2026-11-26). The reads are counted for a block that runs every
# loop: the q and k projections, one launch whose k loop busies one block in eight, count 4 and stay staged; counted
# over all the blocks (2.25) they were not, and the H200 step was 1.7% slower in two runs on a noisy machine
# (bench/results/decode_drain-h200-2026-11-28).
SHARED_BOX_REUSE = 4
RING = 3
CONTRACTION_SMEM = 96 * 1024  # shared memory a contraction's staged slabs may take (all stages)
# Products too small for wgmma's tiles to fill the GPU take one warpgroup's 64 x 64 tiles split over K, their slabs
# in rings of SPLIT_WGMMA_RING (a share's chunks mostly in flight at once). Against 16 mma.sync warps over the same
# tiles in rings of 3, which ran 128 x 2048 x 2048 faster than wgmma in rings of 3 (0.59x -> 0.65x of cuBLAS in
# bench/results/wave_tiles-h100-2026-11-26/small): L4 15.2 -> 13.6 us, 0.72x -> 0.80x (the tuner's point,
# bench/results/tune-h100-2026-11-27/run3; A/B `wg5` in raster8-h100-2026-11-27).
SPLIT_WGMMA_RING = 5
PAD_BYTES = 32  # the widest row pad tile-pad-smem weighs

# tile-persistent's default: tiles a resident block may walk. On an H100 (bench/results/persistent-h100-2026-11-27)
# L2's 7.76 tiles a block ran 4% faster resident, L7's 1.94 3%; L9's 17.9 1% (4.7% on an H200), while the Qwen2.5
# decoder layer (D4), whose gated gate/up product walks 17.9, ran 4-7% slower with every kernel resident.
PERSISTENT_TILES = 8


class StageHeuristic:
    def stage_reuse(self, kernel: T.KernelOp, shared: bool) -> int:
        """How many times a block must read each element of a box for tile-stage-inputs to stage it: twice, or
        SHARED_BOX_REUSE times for a box that every block stages alike at its start (`shared`)."""
        return SHARED_BOX_REUSE if shared else 2

    def stage_budget(self, kernel: T.KernelOp) -> int:
        """Bytes of shared memory the kernel may use for staged inputs."""
        return CONTRACTION_SMEM if contractions_in(kernel) else STAGE_BYTES

    def ring(self, kernel: T.KernelOp, stage: T.StageOp) -> int:
        """Buffers a stage in a loop cycles through: RING; DECODE_RING in decode attention (`_decode_attention`) of
        many blocks and in decode attention on the atoms' top halves; SPLIT_WGMMA_RING for one warpgroup's 64 x 64
        tiles split over K; WGMMA_WIDE_RING for the slabs of a wide wgmma tile (over all its carriers' columns:
        `_wgmma_columns`), as many as fit the block's shared memory up to WAVE_RING for one warpgroup's wide tile (a
        block a multiprocessor, its warps waiting on the copies: L1 0.69x -> 0.71x of cuBLAS, L8 0.67x -> 0.70x at 6
        in bench/results/wave_tiles-h100-2026-11-26/rings)."""
        loops = _wgmma_loops(kernel)
        slabs = fragments.descriptor_stages(kernel)
        blocks = kernel.axis_size("blockIdx.x") * kernel.axis_size("blockIdx.y") * kernel.axis_size("blockIdx.z")
        if blocks >= DECODE_RING_BLOCKS_PER_SM * target().sm_count and not _attention_on_atoms(kernel):
            attention = next((r for r in kernel.walk() if isinstance(r, T.ReduceOp) and _recomputes_a_in(r)), None)
            if attention is not None and _decode_attention(attention):
                return DECODE_RING
        if _sliced_attention(kernel):
            return DECODE_SLICE_RING
        if _attention_on_atoms(kernel):
            top = (r for r in kernel.walk() if isinstance(r, T.ReduceOp) and _tensorized_tile(r) in fragments.TOP_ROWS)
            if any(_recomputes_a_in(r) for r in top):
                return DECODE_RING
            stages = [st for st in kernel.walk() if isinstance(st, T.StageOp)]
            size = {
                st: math.prod(st.box)
                * st.result.type.dtype.bytes
                * (1 + PAD_BYTES / (st.box[-1] * st.result.type.dtype.bytes))
                for st in stages
            }
            ringed = sum(size[st] for st in stages if st.parent_op is stage.parent_op)
            fixed = sum(size.values())
            fits = lambda r: ATTENTION_MMA_BLOCKS_PER_SM * (fixed + (r - 1) * ringed) <= target().smem_per_sm
            return max((r for r in range(2, RING + 1) if fits(r)), default=2)
        split = any(a in T.BLOCK_AXES for r in T.enclosing_loops(stage) if isinstance(r, T.ReduceOp) for a in r.bind)
        if stage in slabs and split and all(lp.extents == (64, 64) for lp in loops):
            return SPLIT_WGMMA_RING
        if stage not in slabs or not any(_wgmma_columns(lp) > WGMMA_TILE[1] for lp in loops):
            return RING
        if any(lp.extents[0] == 64 for lp in loops):
            slot = sum(math.prod(st.box) * st.result.type.dtype.bytes for st in slabs)
            return max(WGMMA_WIDE_RING, min(WAVE_RING, target().smem_per_block // slot))
        return WGMMA_WIDE_RING

    def prefetch(self, kernel: T.KernelOp, stage: T.StageOp) -> int:
        """Trips a ring's copies run ahead: ring - 1, but ring - 2 for slabs wgmma reads through descriptors in a
        ring of 4 or more, so that a trip may leave its group of wgmmas in flight (the slot a trip refills is then
        never one the group in flight reads): in sweep tc1 rings of 4 ran 128 x 128 tiles faster prefetched 2
        than 3 on 6 of the 8 prefill products."""
        if stage.ring >= 4 and stage in fragments.descriptor_stages(kernel):
            return stage.ring - 2
        return stage.ring - 1

    def warp_specialize(self, kernel: T.KernelOp, loop: T.LoopOp) -> bool:
        """Whether tile-warp-specialize gives a loop's copies to a producer warp: where wgmma reads its slabs in a
        wide tile, over all its carriers' columns (the loop then keeps no barrier between the tensor cores'
        groups). Measured on an H100
        (bench/results/warp_specialize-h100-2026-11-26): 128 x 256 tiles (L2, L7, L9, L10) 0.5-3% faster with it,
        within run-to-run noise; 128 x 64 tiles, two or three blocks a multiprocessor (L1, L8), 9-10% slower."""
        if not set(fragments.descriptor_stages(kernel)) & set(loop.body.ops) or _attention_on_atoms(kernel):
            return False  # attention's consumers keep their copies (a producer for it is not built)
        return any(_wgmma_columns(lp) > WGMMA_TILE[1] for lp in _wgmma_loops(kernel))

    def persistent(self, kernel: T.KernelOp, band: T.ForOp, blocks: int) -> bool:
        """Whether tile-persistent keeps the kernel's `blocks` resident: where a producer warp copies its slabs (it
        then runs into the next tile's while the consumers store the last one's outputs; blocks without one gain
        only the launch of the next block, which the GPU overlaps with the last block's end already), and each
        block walks at most PERSISTENT_TILES tiles (a fixed share of many tiles leaves the blocks that fall behind
        no way to hand work to others, as the GPU's own block scheduler does)."""
        return bool(producer_stages(kernel)) and band.work_items <= PERSISTENT_TILES * blocks

    # ---- shared-memory layouts and copies: the bank model (passes/tile/banks.py) decides among these --------------
    def smem_pads(self, kernel: T.KernelOp, stage: T.StageOp) -> tuple[int, ...]:
        """Row pads (elements) tile-pad-smem weighs: powers of two from one element up to PAD_BYTES (a pad of p
        words moves row r's banks by r * p words; two 16-byte vectors' worth is the most a conflict between
        vector accesses needs); none for the ringed slabs of attention sliced among warps (swizzled instead)."""
        if stage.ring > 1 and _sliced_attention(kernel):
            return ()  # its slabs swizzled instead (see DECODE_SLICE_RING)
        size = stage.result.type.dtype.bytes
        return tuple(p for p in (1, 2, 4, 8, 16, 32) if p * size <= PAD_BYTES)

    def smem_swizzles(self, kernel: T.KernelOp, stage: T.StageOp) -> tuple[tuple[int, int, int], ...]:
        """Swizzles (B, M, S) tile-swizzle-smem weighs: units of the widest vector the stage's reads and copy move
        (2^M elements, so no vector leaves one), 1 to 3 bits of the unit's index XOR the B bits S above them,
        every S that keeps those bits inside one copy of the box."""
        widest = max((w for _, w in banks.stage_cost(stage).widths), default=stage.result.type.dtype.bytes)
        m = (widest // stage.result.type.dtype.bytes).bit_length() - 1
        top = memory.slot_type(stage).numel.bit_length() - 1
        return tuple((b, m, sh) for b in (1, 2, 3) for sh in range(1, 8) if m + sh + b <= top)

    def copy_engine(self, kernel: T.KernelOp, stage: T.StageOp) -> bool:
        """Whether tile-tma copies a stage it can with the tensor memory accelerator: a multi-buffered stage (the
        slabs of a contraction's K loop: the engine takes their copies off the threads) whose best layout the
        engine can write (dense, or its swizzle of the box's rows) costs the bank model no more wavefronts than
        the best layout a copy by the threads can have (dense, or one of the pads and swizzles above): the
        engine writes no wavefronts of the threads', but it cannot pad, and swizzles rows of 32, 64 or 128 bytes
        one way only. A stage wgmma reads through descriptors is copied by the engine wherever it can be (only its
        swizzled rows are a layout a descriptor names)."""
        if stage.ring < 2:
            return False
        if stage in fragments.descriptor_stages(kernel):
            return banks_layouts.descriptor_layout(stage) is not None  # wgmma reads it in the layout the engine writes
        engine = [
            {"copy": "tma", "pad": 0, "swizzle": sw} for sw in ((), banks_layouts.tma_layout(stage)) if sw is not None
        ]
        copy = "async" if target().has("cp.async") else "sync"
        threads = [{"copy": copy, "pad": 0, "swizzle": ()}]
        threads += [{"copy": copy, "pad": p, "swizzle": ()} for p in self.smem_pads(kernel, stage)]
        threads += [{"copy": copy, "pad": 0, "swizzle": sw} for sw in self.smem_swizzles(kernel, stage)]
        w = banks.Weigher(stage)
        now = w.cost()
        best = []
        for layouts in (engine, threads):
            fine = [c for c in (banks_layouts.evaluate(stage, a, now, w) for a in layouts) if c.why_not is None]
            best.append(min((c.cost.wavefronts for c in fine), default=float("inf")))
        return best[0] <= best[1]
