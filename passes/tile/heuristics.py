"""The default schedule: what the tile passes choose when an option is left at 0 (the default), from the kernel's
shapes. It lives here, and only here, so it can be replaced (by the tuner's replay, or an experiment):

    from irforge.passes.tile import heuristics
    heuristics.set_heuristic(MyHeuristic())      # a subclass overriding some of the methods

Every answer is one of the option's declared values, so a schedule the heuristic picks is a point the tuner can
reach by writing the same options into the kernel's `tune` attribute. Memory-bound kernels drive the choices
(docs/dialects/tile.md): long reductions shared by a block, 256 threads per block, 16-byte vectors.
"""

from __future__ import annotations

import math

from irforge.dialects import tile as T
from irforge.dialects.kernel.warpgroup import row_blocks
from irforge.dialects.tile import fragments
from irforge.dialects.tile.algebra import contraction_of, contractions_in
from irforge.passes.tile import banks
from irforge.passes.tile_to_kernel import memory
from irforge.passes.tile_to_kernel.memory import producer_stages

from irforge.target import target

THREADS_PER_BLOCK = 256  # enough warps per SM to hide memory latency, several blocks per SM
MIN_COOPERATIVE = 128  # shorter reductions stay in one thread
# A cooperative reduction gives each thread this many bytes of its row (four 16-byte vectors): with fewer the
# combine's fixed cost (shuffles, barriers) dominates, with more a row has too few threads to keep loads in flight.
# Measured on an H100 over rows of 2048 and 4096, f32 and bf16: bench/schedule_sweep.sh, results in
# bench/results/schedule_sweep-h100-2026-11-22/.
BYTES_PER_THREAD = 64
# Rows of a band below threads that share each row fill blocks of this many threads: 128 rather than 256 keeps a
# row of 128 threads alone in its block, where tile-stage-inputs can stage it (measured as fast as two rows).
ROW_BLOCK_THREADS = 128
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
# Contractions on the SIMT path: a thread computes a register tile of up to THREAD_OUTPUTS outputs (8 x 8: 64
# accumulators, with the operand fragments and addresses about 128 registers, two blocks of 256 threads an SM),
# over all its carriers (SiLU * up's two accumulators of 8 x 8 took 255 registers and spilled 24 stores in f32);
# the reduction is staged K_CHUNK_BYTES of each row at a time, in RING stages (PREFETCH of them in flight).
THREAD_OUTPUTS = 64
# Attention (a contraction whose A factor, the scores, a reduction computes in the element): a thread takes whole
# rows of the output (all of the head dimension), a block this many threads sharing each staged key/value chunk.
SCORE_THREADS = 64
# Prefill attention (SCORE_THREADS query rows a head or more) whose rows' lanes share the scores keeps halving its
# row blocks, while they keep ATTENTION_MIN_BLOCK_THREADS threads, until there are ATTENTION_BLOCKS_PER_SM blocks a
# multiprocessor: causal blocks' costs differ (late rows walk more keys, early ones skip most chunks), and with one
# or two blocks a multiprocessor the busiest one sets the time. Attention A/B at 8dd34f8
# (bench/results/attention_ab-h100-2026-11-26b): QW s512 in blocks of 16 rows instead of 64, 287 -> 201 us; TL
# s512 in blocks of 32, 102 -> 81 us (16 rows: 89 us).
ATTENTION_BLOCKS_PER_SM = 3.5
ATTENTION_MIN_BLOCK_THREADS = 64
# ... unless the O row would not fit a thread's registers next to its Q row (head dimension 128 in f32: 128 + 128
# values spilled). Then `row_lanes` threads along x share each row: each holds ROW_LANE_OUTPUTS columns of O at most
# and the same slice of the scores' reduction, the slices' sums meeting in a shuffle within the row's lanes.
ROW_LANE_OUTPUTS = 32
# A band of at most DECODE_ROWS rows (decode: a KV head's few query heads, one position each) walks its keys one
# dependent step after another with little else to switch to, so its rows take more lanes, down to
# DECODE_LANE_OUTPUTS columns a lane (a warp at most): the step's dot product is shorter, the blocks more.
# bench/results/attention_decode-h100-2026-11-26: head dimension 64, 4 -> 16 lanes, 9.2 -> 6.8 us (cache 48),
# 18.9 -> 9.8 (512), 22.6 -> 12.1 (2048); head dimension 128 already takes 32 (7 rows: a warp's worth).
DECODE_ROWS = 16
DECODE_LANE_OUTPUTS = 4
# ... and a prefill band of more rows whose rows times lanes come under ROW_FILL_THREADS_PER_SM threads a
# multiprocessor doubles its lanes, up to ROW_FILL_LANES and DECODE_LANE_OUTPUTS columns a lane: its rows alone
# leave the GPU short of threads. seed84's f32 attention (bench/results/attention_lanes-h100-2026-11-27): 1024 rows
# at head dimension 64, 2 -> 16 lanes, 8.7 -> 6.0 us; 4096 rows, 2 -> 8 lanes, 17.7 -> 16.0; 3584 rows at 128,
# 4 -> 8 lanes, 26.1 -> 22.7; 16384 rows keep 2 (82 us, 137 on 4).
ROW_FILL_THREADS_PER_SM = 192
ROW_FILL_LANES = 16
# ... unless the batch's rows (every sequence's query heads) number DECODE_BUSY_ROWS_PER_SM a multiprocessor or more:
# the blocks then keep the multiprocessors busy, and the instructions a key costs set the time, so a lane takes
# DECODE_BUSY_LANE_OUTPUTS columns (fewer lanes, fewer shuffle rounds a score). F4 (32 sequences x 32 heads, d 64)
# 65 -> 55 us on 8 lanes instead of 16; one sequence (F5, D1, D2) ran 1.3-1.7x slower on fewer lanes
# (bench/results/attention_decode-h100-2026-11-27).
DECODE_BUSY_ROWS_PER_SM = 4
DECODE_BUSY_LANE_OUTPUTS = 8
# Decode attention's K/V rings take DECODE_RING slots where its blocks number DECODE_RING_BLOCKS_PER_SM a
# multiprocessor or more (more than fit at once with rings of RING: 9 of F4's): more of them resident beat a
# deeper ring, F4 55 -> 52 us, F6 116 -> 113 us. Fewer blocks keep rings of RING, every chunk's copy in flight
# at once (TinyLlama's decode step, 16 blocks on a 48-key cache: 1.10 -> 1.17 ms on rings of 2). Decode attention
# on the atoms' top halves (`fragments.TOP_ROWS`: one-warp blocks split toward DECODE_MMA_BLOCKS_PER_SM a
# multiprocessor) takes DECODE_RING too: F6 56.8 -> 54.8 us, F4 30.2 -> 29.7, F5 11.9 -> 11.8 against rings of 3
# (bench/results/decode_rings-h100-2026-11-27).
DECODE_RING = 2
DECODE_RING_BLOCKS_PER_SM = 8
# Attention's keys are split across blocks (flash-decoding) toward ATTENTION_WARPS_PER_SM warps a multiprocessor:
# a warp walks its share of the keys one dependent step after another (scores, shuffles, the online rescale), so
# only many warps in flight keep the multiprocessors issuing, and the K/V streams' latency hidden. Shares keep at
# least ATTENTION_MIN_SHARE chunks (the ring's copies ahead of the reads), and MIN_SHARE while the kernel does more
# than SIMT_FLOPS_PER_BYTE flops a K/V byte (prefill: 2 * rows / bytes-per-element; an H100's f32 FMA rate over its
# bandwidth, 67 TFLOP/s / 3.35 TB/s), where every share's partial O (rows x N in f32) costs traffic its compute
# does not hide.
ATTENTION_WARPS_PER_SM = 16
# Where the kernel is bound by memory (decode: a KV head's few query rows), toward ATTENTION_DECODE_BLOCKS_PER_SM
# blocks a multiprocessor instead, shares of DECODE_MIN_SHARE_KEYS keys at least: its blocks are short, and several
# waves of them hide the loads' and shuffles' latency. bench/results/attention_decode-h100-2026-11-27: F4 (32 x 32
# heads, d 64, 2048 keys, 256 one-warp blocks) 8 shares 52 us, 32 shares 58; F6 (d 128, 128 blocks of 7 warps) 2
# shares 135 us, 16 shares 112; F5 (one sequence, 4 blocks) 32 shares 16.5 us, 16 shares 20, 8 shares 29; D2
# (Qwen2.5's decode layer, 513 keys) 57 shares 206 us, 171 (three keys each) 242.
ATTENTION_DECODE_BLOCKS_PER_SM = 16
DECODE_MIN_SHARE_KEYS = 8
# Attention of 16-bit factors at prefill runs both products on wgmma where a warpgroup's 64 rows take the block's
# warps 16 rows each and V's rows are one swizzle span or whole 128-byte spans (`_attention_on_wgmma`), else on
# mma.sync atoms (`attention_atom`). On an H100 (bench/results/attention_wgmma-h100-2026-11-28): F2 87.5 -> 66.3 us
# (0.70x -> 0.91x of SDPA), F1 15.5 -> 13.8 (0.85x -> 0.95x). On mma.sync: blocks of
# ATTENTION_MMA_WARPS warps, each whole query rows (a row's scores, max and exp(x - m) stay in its lanes): 16, or
# ATTENTION_MMA_WARP_ROWS for a head dimension over ATTENTION_MMA_NARROW_HEAD where the queries come in such blocks
# (each K/V fragment a warp reads from shared memory then serves twice the rows). On an H100
# (bench/results/attention_mma-h100-2026-11-26/ab): head dimension 128 (F3) 272 -> 220 us with 32 rows; 64 (F1,
# F2) 22 -> 25 and 132 -> 147 us, its smaller tiles leaving room for more blocks a multiprocessor. Chunks of
# ATTENTION_MMA_KEYS keys, halved while a lane's scores and O (warp rows x (keys + head dimension) / 32 values)
# exceed ATTENTION_MMA_REGISTERS: at head dimension 64, 128 keys a chunk over 64 halve the chunks' fixed cost (the
# waits, barriers and row max/sum shuffles), F2 97.6 -> 90.5 us, F1 18.0 -> 17.6 (167 registers, no spill); at
# 128, 32-row warps keep 32 (bench/results/attention_keys-h100-2026-11-27).
# On wgmma, chunks are halved while Q and rings of 2 of the K and V chunks would leave a multiprocessor fewer than
# ATTENTION_WGMMA_BLOCKS_PER_SM blocks: F3 (head dimension 128, K and V stored in blocks of 64 columns) 134.8 us in
# chunks of 128 keys (144 KB a block, one a multiprocessor), 112.0 in chunks of 64 (80 KB, two; 110.4 and 111.4
# in two runs as the default), 111.4 in 128-row blocks of two warpgroups sharing chunks of 128; on mma.sync (32 rows
# a warp) 175.9 (bench/results/attention_wgmma128-h100-2026-11-28). F1 and F2 (64) keep chunks of 128 (72 KB).
ATTENTION_WGMMA_BLOCKS_PER_SM = 2
ATTENTION_MMA_WARPS = 4
ATTENTION_MMA_WARP_ROWS = 32
ATTENTION_MMA_NARROW_HEAD = 64
ATTENTION_MMA_KEYS = 128
ATTENTION_MMA_REGISTERS = 160
# ... its K/V rings as deep as leave shared memory for ATTENTION_MMA_BLOCKS_PER_SM blocks a multiprocessor (a
# block's four warps alone leave it idle at every shuffle and wait: F3, head dimension 128, in rings of 3 fit one
# block a multiprocessor, 6% occupancy under ncu in bench/results/attention_mma-h200-2026-11-26). Sizing them for
# the 4 blocks its registers allow at head dimension 64 (rings of 2) ran F1 and F2 no faster than rings of 3
# (bench/results/attention_exp2-h100-2026-11-26). With chunks of 128 keys, sized for 3 (rings of 2: 74 KB a
# block, as many as its 167 registers allow): F2 90.5 -> 89.1 us, F1 17.6 -> 16.8; F3 (rings of 2 for 3, though
# its registers allow 2) 177.6 -> 174.7 (bench/results/attention_keys-h100-2026-11-27).
ATTENTION_MMA_BLOCKS_PER_SM = 3
# Decode attention of a KV head's few query rows (a GQA group of 4 to 8 heads at one position: `fragments.TOP_ROWS`)
# runs on the atoms' top halves (`dialects/kernel/fragments.py`): a warp a block, its keys split over blocks toward
# DECODE_MMA_BLOCKS_PER_SM blocks a multiprocessor, shares of ATTENTION_MIN_SHARE chunks at least (streaming the
# cache at memory speed needs many blocks' copies in flight; each block's scores then cost a few mma.sync, not a
# shuffle-reduced dot product a key). bench/results/attention_decode_mma-h100-2026-11-27: F4 (32 sequences, 2048
# keys, head dimension 64) 51 us on the SIMT path, 39.1 on the atoms toward 8 blocks, 38.3 toward 4; F6 (Qwen2.5's
# groups of 7, 128) 112 -> 68.7 -> 66.8 us; F5 (one sequence) 16.1 -> 13.3 us either way.
DECODE_MMA_BLOCKS_PER_SM = 4
# ... unless its blocks already fill a wave (WAVE_FILL: one per KV head of a batch of 32 sequences), where the keys are
# sliced among DECODE_SLICE_WARPS warps of each block instead (`tile-split-reduce across=warps`), which fold their
# carriers through shared memory in the same kernel: no second kernel to combine the shares, and rings of
# DECODE_SLICE_RING slabs of all the warps' chunks. On an H200 (bench/results/decode_sliced-h200-2026-11-28): F4
# 22.7-23.0 -> 21.9-22.0 us, F6 44.5-44.8 -> 39.6-39.8 (2 warps in rings of 4: 40.2-40.4; 4 in rings of 2: 43.1;
# 8 warps, smaller chunks, shallower pipelines: slower).
DECODE_SLICE_WARPS = 4
DECODE_SLICE_RING = 3
# Its K/V slabs, where its threads copy them (rows over 128 bytes, which the copy engine cannot swizzle), are
# swizzled rather than padded (`smem_pads` offers no pad), though the bank model finds the two equal: F6 39.8-39.9
# -> 37.6-37.7 us with swizzle(3, 3, 4) in place of a pad of 8 (bench/results/decode_sliced-h200-2026-11-28/copies).
# ... in chunks of keys whose K slab takes DECODE_MMA_SLAB_BYTES at most (64 keys of a head dimension of 64, 32 of
# 128), so that rings of RING such chunks of K and V leave room for 4 blocks a multiprocessor.
DECODE_MMA_SLAB_BYTES = 8192
SIMT_FLOPS_PER_BYTE = 20
ATTENTION_MIN_SHARE = 2
CONTRACTION_THREADS = 256
FILL_THREAD_OUTPUTS = 4  # outputs a thread of a tile shrunk to fill the GPU (contraction_tile)
K_CHUNK_BYTES = 64
RING = 3
SPLITS = (2, 3, 4, 6, 8, 12, 16, 24, 32)  # the blocks a reduction may be split over
RASTER_THREADS = False  # see warp_rows
MIN_SHARE = 8  # trips of a split reduction's share (K chunks): below it the pipeline's fill and drain dominate
TILE_ROWS_ONE_WAVE = 64  # see reduce_splits
# Split-K (reduce_splits): toward SPLIT_BLOCKS_PER_SM blocks per multiprocessor, and DEEP_SPLIT ways at least
# while the kernel has under DEEP_SPLIT_WAVES blocks per multiprocessor and shares keep DEEP_SHARE chunks; deeper
# while shares keep DEEP_SHARE chunks and the blocks fit one wave of resident blocks (CONTRACTION_REGISTERS a
# thread: an 8 x 8 tile's 128 to 145 on the seed shapes), or LONG_SPLIT_WAVES waves while shares keep LONG_SHARE.
SPLIT_BLOCKS_PER_SM = 2
DEEP_SPLIT, DEEP_SHARE, DEEP_SPLIT_WAVES = 4, 32, 8
LONG_SHARE, LONG_SPLIT_WAVES = 64, 2
CONTRACTION_REGISTERS = 128
MIN_ROW_SHARE = 4096  # elements of a long row each block of a split row takes at least
CONTRACTION_SMEM = 96 * 1024  # shared memory a contraction's staged slabs may take (all stages)
# Tensor cores: a product of 16-bit floats streams its weight (2 bytes an element) at 2 * M flops a byte; the SIMT
# path's fused multiply-adds run out at about 20 flops a byte of an H100's bandwidth (67 TFLOP/s over 3.35 TB/s), so
# from TENSOR_MIN_ROWS rows (one m16n8k16 atom) the tensor cores compute it, below it stays a GEMV on the SIMT path
# (split-K, 16-byte loads of the weight). Prefill-sized outputs take blocks of MMA_TILE (rows, columns, threads: 2 x 2
# warps of 64 x 64, 128 accumulators a thread), smaller tiles when they leave multiprocessors idle, and chunks of K
# of MMA_K_CHUNK_BYTES (rows of 128 bytes: the widest swizzle, conflict-free ldmatrix and wgmma descriptors).
TENSOR_MIN_ROWS = 16
MMA_TILE = (128, 128, 128)
MMA_ACCUMULATORS = 128  # f32 accumulators a thread holds (of 255 registers), over all carriers
MMA_K_CHUNK_BYTES = 128
MMA_SPLIT_THREADS = 512  # most threads of a tile halved to fill the GPU (then split over K): _mma_tile
# Products too small for wgmma's tiles to fill the GPU take one warpgroup's 64 x 64 tiles split over K, their slabs
# in rings of SPLIT_WGMMA_RING (a share's chunks mostly in flight at once). Against 16 mma.sync warps over the same
# tiles in rings of 3, which ran 128 x 2048 x 2048 faster than wgmma in rings of 3 (0.59x -> 0.65x of cuBLAS in
# bench/results/wave_tiles-h100-2026-11-26/small): L4 15.2 -> 13.6 us, 0.72x -> 0.80x (the tuner's point,
# bench/results/tune-h100-2026-11-27/run3; A/B `wg5` in raster8-h100-2026-11-27).
SPLIT_WGMMA_RING = 5
# On sm_90a, products of WGMMA_MIN_ROWS rows or more run on wgmma (a warpgroup takes 64 rows) in blocks of WGMMA_TILE,
# or of WGMMA_WIDE_TILE's rows over up to its columns where those fill WAVE_FILL of the multiprocessors: two warpgroups
# of 64 x 256 (128 accumulators a thread, one block an SM) read half the shared memory per flop, and their slabs
# cycle through WGMMA_WIDE_RING buffers, so a trip's group of wgmmas stays in flight while the next is issued.
# Sweep tc1 (bench/results/contraction_sweep-h100-2026-11-26): L2, L7, L9, L10 from 0.63-0.66x of cuBLAS to
# 0.69-0.96x; the products with fewer wide tiles than multiprocessors (L1, L3, L4, L8) ran slower on them. The
# columns are those that cut the tiles into whole waves (`_wave_columns`), and products with too few tiles for
# either take one warpgroup's tiles near a whole wave, in rings up to WAVE_RING (wave_tiles-h100-2026-11-26). 128
# wide tiles count as a wave of 132 (WAVE_FILL): L3, 2048 x 2048 x 5632, ran 0.77x -> 0.90x of cuBLAS on them
# (linears_ab-h100-2026-11-26/l3_tiles).
WGMMA_MIN_ROWS = 64
WGMMA_TILE = (128, 128)
WGMMA_WIDE_TILE = (128, 256)
WGMMA_WIDE_RING = 4
WAVE_RING = 6
WAVE_FILL = 0.9  # a wave of tiles this full is one: 128 tiles on 132 multiprocessors are not split further
PAD_BYTES = 32  # the widest row pad tile-pad-smem weighs
RASTER_ROWS = (1, 2, 4, 8, 16, 32)  # groups of block rows tile-rasterize weighs
# tile-rasterize leaves row order unless the L2 model saves this fraction of its DRAM bytes: the 2% it gave raster 16
# on a 2048^3 product bought nothing on an H100 (bench/results/contraction_sweep-h100-2026-11-24/sweep6).
RASTER_MIN_SAVING = 0.10
# Where every operand fits L2 the DRAM model sees no difference between orders, yet grouping rows still paid on an
# H100: one wave of 64 x 160 and 64 x 224 wgmma tiles (llm L1, L8) ran 1.13x and 1.19x faster in groups of 4-8 rows
# than in row order (the tuner: bench/results/tune-h100-2026-11-26b; A/B: linears_ab-h100-2026-11-26/raster, L1
# 0.73x -> 0.82x and L8 0.69x -> 0.81x of cuBLAS). The model does not explain it; the measurement does. Groups of
# 8 over 4 (the tuner's pick for L1 and L8 in bench/results/tune-h100-2026-11-27/run3; A/B in
# raster8-h100-2026-11-27): L1 17.7 -> 17.2 us, L1.f16 17.7 -> 16.9, L8.f16 32.9 -> 31.3, L8 31.6 -> 32.1, the
# seed84 products within 0.5%.
RASTER_IN_L2 = 8
# An innermost loop unrolls fully (tile-unroll) up to this many register-tile element operations: a contraction's
# chunk of K (BK / 4 steps of an 8 x 8 tile's 64 fused multiply-adds and 16 operand loads) fits at BK up to 64.
UNROLL_OPS = 4096


def _pow2_floor(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def _pow2_ceil(n: int) -> int:
    return 1 << (max(n, 1) - 1).bit_length()


class Heuristic:
    def cooperative_threads(self, kernel: T.KernelOp, reduce: T.ReduceOp) -> int:
        """Threads along threadIdx.x that share `reduce` (1: it stays in one thread). A contraction's reduction is
        not shared, nor any other at the point of a contraction's outputs (attention's softmax statistics beside
        P @ V): the outputs are tiled over threads instead (`tile-blockify`), each thread its points' statistics."""
        n = reduce.extents[0]
        if contraction_of(reduce) is not None:
            return 1
        if any(contractions_in(band) for band in reduce.ancestors() if isinstance(band, T.ForOp)):
            return 1
        loads = [op.operands[0].type.dtype for op in reduce.walk() if isinstance(op, T.LoadOp)]
        size = min((t.bytes for t in loads), default=4)
        if n < MIN_COOPERATIVE:  # a short row: a thread a 16-byte vector of it, the row's threads within a warp
            return max(1, min(target().warp_size, _pow2_floor(n * size // 16)))
        return max(32, min(THREADS_PER_BLOCK, _pow2_floor(n * size // BYTES_PER_THREAD)))

    def band_threads(self, kernel: T.KernelOp, band: T.ForOp, axis: str) -> int:
        """Threads along `axis` a band's points are split over (1: the band stays one point per block).

        Along threadIdx.x (nothing inside shares the band's point): up to 256, no more than the points. Along y,
        below threads that share each point: rows per block filling 128 threads, but no more than leave a block for
        each multiprocessor, dividing the points evenly (so a combine inside never waits for a row that has no
        point)."""
        points = band.work_items
        if axis == "threadIdx.x":
            return min(THREADS_PER_BLOCK, _pow2_ceil(points))
        per_point = kernel.threads
        rows = max(1, min(ROW_BLOCK_THREADS // per_point, _pow2_floor(points // target().sm_count)))
        while rows > 1 and points % rows:
            rows //= 2
        return rows

    def vector_width(self, kernel: T.KernelOp, loop: T.LoopOp, narrowest_bytes: int, legal) -> int:
        """Elements per work item for `loop`: 16 bytes of its narrowest accessed type, as many as `legal(width)`
        allows, and (for loops on a block's threads) no fewer work items than the block has threads."""
        v = max(1, 16 // narrowest_bytes)
        units = loop.units(kernel) if not any(a in T.BLOCK_AXES for a in loop.bind) else 1
        while v > 1 and (not legal(v) or loop.iterations // v < units):
            v //= 2
        return v

    def stage_reuse(self, kernel: T.KernelOp, shared: bool) -> int:
        """How many times a block must read each element of a box for tile-stage-inputs to stage it: twice, or
        SHARED_BOX_REUSE times for a box that every block stages alike at its start (`shared`)."""
        return SHARED_BOX_REUSE if shared else 2

    def stage_budget(self, kernel: T.KernelOp) -> int:
        """Bytes of shared memory the kernel may use for staged inputs."""
        return CONTRACTION_SMEM if contractions_in(kernel) else STAGE_BYTES

    # ---- contractions -------------------------------------------------------------------------------------------
    def contraction_tile(self, kernel: T.KernelOp, band: T.ForOp, m_dim: int, n_dim: int) -> tuple[int, int, int]:
        """(bm, bn, threads): the output tile of a block and its threads. On the tensor cores (`tensor_atom`):
        `_mma_tile`. On the SIMT path: small tiles of 8 x 8 register tiles
        (64 x 64 outputs for 64 threads; 32 x 128 when there are fewer rows) and many blocks, split-K filling
        the GPU (`reduce_splits`): measured best on an H100 from M = 32 to 2048 (sweep 3 of
        bench/results/contraction_sweep-h100-2026-11-24: 0.83-0.95x cuBLAS, where 64 x 128 tiles of 128 threads
        reached 0.73-0.89x)."""
        m, n = band.extents[m_dim], band.extents[n_dim]
        if _recomputes_a(band) and self.attention_atom(kernel, band, band.ivs[m_dim], band.ivs[n_dim]):
            if m in fragments.TOP_ROWS:
                return m, n, target().warp_size
            warps = ATTENTION_MMA_WARPS
            ops = fragments.attention_operands(band, band.ivs[m_dim], band.ivs[n_dim])
            wide = n > ATTENTION_MMA_NARROW_HEAD and m % (warps * ATTENTION_MMA_WARP_ROWS) == 0
            wide = wide and not _attention_on_wgmma(ops, n)  # a warpgroup's warps take 16 rows each
            rows = warps * (ATTENTION_MMA_WARP_ROWS if wide else 16)
            return rows, n, warps * target().warp_size
        if _recomputes_a(band):  # a thread's tile spans N, so each A element (a score) is computed once
            rows = max(1, THREAD_OUTPUTS // n)
            bm = max(x for x in range(1, min(m, rows * SCORE_THREADS) + 1) if m % x == 0)
            return bm, n, max(1, min(SCORE_THREADS, bm))
        family = self.tensor_atom(kernel, band, band.ivs[m_dim], band.ivs[n_dim])
        if family == "wgmma" and m % 64 == 0 and n % 8 == 0:
            return self._wgmma_tile(kernel, band, m, n)
        if family is not None:
            return self._mma_tile(kernel, band, m, n)
        bm = max((x for x in (64, 32, 16, 8) if m % x == 0), default=m if m < 8 else 1)
        if bm <= 8 and bm == min(m, 8):
            # Eight rows or fewer (a decode step of a few sequences): a block takes them all, so each weight element
            # it stages serves every row, and FILL_THREAD_OUTPUTS outputs a thread keep it at several warps (8 x 8
            # register tiles made blocks of 16 threads, and of 2 for fewer than 8 rows).
            bn = _simt_columns(bm, n)
            return bm, bn, max(1, min(CONTRACTION_THREADS, bm * bn // FILL_THREAD_OUTPUTS))
        bn = _simt_columns(bm, n)
        deepest = max(_splits_of(self._k_trips(kernel, band)))
        others = math.prod(band.extents) // (m * n)
        fills = lambda: (m // bm) * (n // bn) * others * deepest >= target().sm_count
        if deepest < DEEP_SPLIT or fills() or bm <= 8:
            return bm, bn, max(1, min(CONTRACTION_THREADS, bm * bn // _thread_outputs(band)))
        # A long K over too few tiles to fill the multiprocessors even at the deepest split (decode's narrow
        # projections), in tiles of more than 8 rows: fewer rows until that split's blocks fill them, and
        # FILL_THREAD_OUTPUTS outputs a thread (up to CONTRACTION_THREADS threads), so the one or two blocks a
        # multiprocessor gets still hold several warps. matmul.QW.kv.s32 (M = 32, N = 512, K = 3584: 4 tiles of
        # 32 x 128, 64 blocks at split 16): 8 x 128 tiles of 256 threads, 256 blocks; `irforge tune` measured
        # that point 1.43x faster on an H100 (bench/results/tune-h100-2026-11-24/winners.json).
        while bm > 8 and m % (bm // 2) == 0 and not fills():
            bm //= 2
            bn = _simt_columns(bm, n)
        return bm, bn, max(1, min(CONTRACTION_THREADS, bm * bn // FILL_THREAD_OUTPUTS))

    def _k_trips(self, kernel: T.KernelOp, band: T.ForOp) -> int:
        """Trips of the band's contraction's reduction once chunked (`reduce_chunk`): what split-K divides."""
        c = contractions_in(band)
        if not c:
            return 1
        reduce = c[0].reduce
        return reduce.extents[0] // max(1, self.reduce_chunk(kernel, reduce))

    def row_lanes(self, kernel: T.KernelOp, band: T.ForOp, m_dim: int, n_dim: int) -> int:
        """Threads along x sharing each row of an attention-shaped contraction's output tile (a contraction whose A
        factor a reduction computes in the element: the scores); 1 for any other, or where a thread holds the
        whole row. Enough lanes that each holds at most ROW_LANE_OUTPUTS columns of the row (DECODE_LANE_OUTPUTS
        in a band of DECODE_ROWS rows at most, DECODE_BUSY_LANE_OUTPUTS where the batch's rows keep every
        multiprocessor busy), its slice of the scores' reduction as long; more at prefill while all the rows times
        the lanes come under ROW_FILL_THREADS_PER_SM a multiprocessor; then more while the
        block's rows times the lanes would leave a warp partly empty (the lanes' shuffles need whole warps), at
        most a warp and one column a lane."""
        if not _recomputes_a(band) or self.attention_atom(kernel, band, band.ivs[m_dim], band.ivs[n_dim]):
            return 1
        n = band.extents[n_dim]
        rows = math.prod(band.extents) // band.extents[n_dim]
        busy = rows >= DECODE_BUSY_ROWS_PER_SM * target().sm_count
        decode = DECODE_BUSY_LANE_OUTPUTS if busy else DECODE_LANE_OUTPUTS
        most = decode if band.extents[m_dim] <= DECODE_ROWS else ROW_LANE_OUTPUTS
        lanes = 1
        while n // lanes > most and n % (2 * lanes) == 0 and 2 * lanes <= target().warp_size:
            lanes *= 2
        if band.extents[m_dim] > DECODE_ROWS:
            fill = ROW_FILL_THREADS_PER_SM * target().sm_count
            while (
                rows * lanes < fill
                and 2 * lanes <= ROW_FILL_LANES
                and n % (2 * lanes) == 0
                and n // (2 * lanes) >= DECODE_LANE_OUTPUTS
            ):
                lanes *= 2
        if lanes == 1:
            return 1
        rows, _ = self.attention_tile(kernel, band, m_dim, n_dim, lanes)
        warp = target().warp_size
        while (rows * lanes) % warp and 2 * lanes <= min(warp, n) and n % (2 * lanes) == 0:
            lanes *= 2
        return lanes

    def attention_tile(self, kernel: T.KernelOp, band: T.ForOp, m_dim: int, n_dim: int, lanes: int) -> tuple[int, int]:
        """(rows, threads) of a block of an attention-shaped contraction whose rows `lanes` threads share: up to
        SCORE_THREADS rows dividing M, halved while the blocks would leave multiprocessors idle and a warp of
        threads is left (more blocks, each streaming its K/V chunks, rather than idle multiprocessors); at prefill
        (SCORE_THREADS rows or more), also while there are fewer than ATTENTION_BLOCKS_PER_SM blocks a
        multiprocessor and ATTENTION_MIN_BLOCK_THREADS threads are left (causal blocks' uneven costs even out)."""
        m = band.extents[m_dim]
        others = math.prod(band.extents) // (m * band.extents[n_dim])
        bm = max(x for x in range(1, min(m, SCORE_THREADS) + 1) if m % x == 0)
        sms, warp = target().sm_count, target().warp_size

        def halve() -> bool:
            blocks, threads = others * (m // bm), (bm // 2) * lanes
            if blocks < sms and threads >= warp:
                return True
            balance = m >= SCORE_THREADS and blocks < ATTENTION_BLOCKS_PER_SM * sms
            return balance and threads >= ATTENTION_MIN_BLOCK_THREADS

        while bm % 2 == 0 and halve():
            bm //= 2
        return bm, bm * lanes

    def _mma_tile(self, kernel: T.KernelOp, band: T.ForOp, m: int, n: int) -> tuple[int, int, int]:
        """A tensor-core block tile: MMA_TILE's rows and columns, or the largest dividing the shape; for prefill
        (TILE_ROWS_ONE_WAVE rows or more) halved, columns first, while the blocks fill fewer than all
        multiprocessors and tiles of 64 x 64 are left. Threads enough that each holds at most MMA_ACCUMULATORS
        accumulators over the contraction's carriers (SiLU * up has two), a warp at least 16 x 8 outputs; a tile
        halved so (its K split over blocks next) a warp per 16 x 16 outputs: 16 warps over 64 x 64, whose loads
        and mma.syncs hide each other's latency where one wgmma warpgroup waits (L4, 128 x 2048 x 2048: 0.58x ->
        0.67x of cuBLAS in bench/results/wave_tiles-h100-2026-11-26/mma, the point `irforge tune` found)."""
        tm, tn, threads = MMA_TILE
        bm = max((x for x in (tm, 64, 32, 16) if m % x == 0 and x <= tm), default=1)
        bn = max((x for x in (tn, 64, 32, 16, 8) if n % x == 0 and x <= tn), default=1)
        others = math.prod(band.extents) // (m * n)
        halved = False
        while m >= TILE_ROWS_ONE_WAVE and (m // bm) * (n // bn) * others < target().sm_count and max(bm, bn) > 64:
            halved = True
            if bn >= bm and n % (bn // 2) == 0:
                bn //= 2
            elif m % (bm // 2) == 0:
                bm //= 2
            else:
                break
        carriers = max(1, len(contractions_in(band)[0].reduce.results)) if contractions_in(band) else 1
        if halved and bm % 16 == 0 and bn % 16 == 0:
            return bm, bn, min(MMA_SPLIT_THREADS, 32 * (bm // 16) * (bn // 16))
        threads = min(threads * 2, max(threads, bm * bn * carriers // MMA_ACCUMULATORS))
        return bm, bn, max(32, min(threads, 32 * (bm // 16) * (bn // 8)))

    def _wgmma_tile(self, kernel: T.KernelOp, band: T.ForOp, m: int, n: int) -> tuple[int, int, int]:
        """A wgmma block tile, a warpgroup per 64 rows, cutting the outputs into whole waves of blocks
        (`_wave_columns`): WGMMA_WIDE_TILE's rows over a wide tile's columns where those fill WAVE_FILL of the
        multiprocessors (one carrier: up to 128 accumulators a thread); else WGMMA_TILE (two warpgroups of 64 rows
        over 128 columns: 64 accumulators a thread a carrier) where those fill them; else, fewer tiles than
        multiprocessors, one warpgroup of 64 rows over columns that come nearest a whole wave, and failing that
        (a short M: decode-like products that split K instead) WGMMA_TILE halved, columns first, to 64 x 64.
        Sweep wave_tiles-h100-2026-11-26: L7 0.70x -> 0.85x of cuBLAS (128 x 192), L10 0.97x -> 1.04x (128 x 224),
        L1 0.58x -> 0.68x (64 x 160), L8 0.60x -> 0.68x (64 x 224)."""
        others = math.prod(band.extents) // (m * n)
        sms = target().sm_count
        wm, wide = WGMMA_WIDE_TILE
        tm, tn = WGMMA_TILE
        carriers = len(contractions_in(band)[0].reduce.results) if contractions_in(band) else 1
        if carriers == 1 and m % wm == 0:
            wn = _wave_columns(m // wm * others, n, tn + 16, wide, WAVE_FILL)
            if wn is not None:
                return wm, wn, 2 * wm
        bm = tm if m % tm == 0 else 64
        bn = max(x for x in (tn, 64, 32, 16, 8) if n % x == 0 and x <= tn)
        if (m // bm) * (n // bn) * others >= sms:
            return bm, bn, 2 * bm
        few = _wave_columns(m // 64 * others, n, 64, wide if carriers == 1 else tn, WAVE_FILL)
        if few is not None and m % 64 == 0:
            return 64, few, 128
        while (m // bm) * (n // bn) * others < sms and max(bm, bn) > 64:
            if bn >= bm and n % (bn // 2) == 0:
                bn //= 2
            else:
                bm //= 2
        return bm, bn, 2 * bm

    def register_tile(self, kernel: T.KernelOp, loop: T.ForOp, m_dim: int, n_dim: int) -> tuple[int, int]:
        """(tm, tn): each thread's register tile of a contraction's outputs: the loop's points over its units,
        as square as it goes, wider along N (the contiguous direction of B and of the output)."""
        units = loop.units(kernel)
        per_thread = max(1, loop.iterations // units)
        m, n = loop.extents[m_dim], loop.extents[n_dim]
        if _recomputes_a(loop):  # all of N (or the row's lanes' share of it: `row_lanes`), rows for the rest
            tn = min(n, per_thread)
            tm = max(1, per_thread // tn)
            while m % tm:
                tm //= 2
            return tm, tn
        tm = tn = 1
        while tm * tn < min(per_thread, _thread_outputs(loop)):
            if tn <= tm and n % (tn * 2) == 0:
                tn *= 2
            elif m % (tm * 2) == 0:
                tm *= 2
            elif n % (tn * 2) == 0:
                tn *= 2
            else:
                break
        return tm, tn

    def warp_rows(self, kernel: T.KernelOp, loop: T.ForOp) -> int:
        """Register tiles a warp spans down the rows of a contraction's output tile (1: the threads' natural
        row-major order). Grouping R x 32 / R tiles reads fewer distinct operand elements per step (R * TM of A,
        32 / R * TN of B), but A's rows are K_CHUNK_BYTES apart in shared memory, so R rows of it TM apart fall in
        one bank group: measured slower on an H100 (bench/results/contraction_sweep-h100-2026-11-24/sweep2: 0.44x
        of cuBLAS with R = 4 against 0.64x without), so it stays 1 until the rows are swizzled apart."""
        if not RASTER_THREADS:
            return 1
        widths = loop.vector_shape
        if len(widths) < 2:
            return 1
        tm, tn = widths[-2], widths[-1]
        grid = loop.layout.work_grid
        warp = target().warp_size
        options = [r for r in (1, 2, 4, 8, 16, 32) if grid[-2] % r == 0 and r <= grid[-2] and warp // r <= grid[-1]]
        return min(options, key=lambda r: (r * tm + warp // r * tn, r), default=1)

    def reduce_chunk(self, kernel: T.KernelOp, reduce: T.ReduceOp) -> int:
        """Iterations of a reduction per chunk (1: not chunked): a contraction's slabs are staged K_CHUNK_BYTES of
        each row at a time, MMA_K_CHUNK_BYTES on the tensor cores, halved (down to K_CHUNK_BYTES) while several
        carriers' slabs (a B slab each: gate and up) would not fit a ring of WGMMA_WIDE_RING stages. The fused
        gate/up products took 64-element chunks over 32 (a ring of 4, a producer): Qwen2.5's 512 x 18944 x 3584
        pair 397 -> 237 us (0.61x -> 0.96x of cuBLAS's two products and SiLU), its 2048-row one 1184 -> 905 us,
        TinyLlama's 90 -> 64 us (bench/results/gated-h100-2026-11-27)."""
        c = contraction_of(reduce)
        if c is None:
            return 1
        size = min(ld.buffer.type.dtype.bytes for ld in c.a + c.b)
        k = reduce.extents[0]
        tensorized = fragments.atom_step(reduce) > 1
        chunk = (MMA_K_CHUNK_BYTES if tensorized else K_CHUNK_BYTES) // size
        if tensorized and len(reduce.results) > 1:
            rows, cols = next(lp for lp in T.enclosing_loops(reduce) if "atom" in lp.attributes).extents
            slab_rows = rows + len(reduce.results) * cols
            while chunk * size > K_CHUNK_BYTES and WGMMA_WIDE_RING * slab_rows * chunk * size > target().smem_per_block:
                chunk //= 2
        if fragments.atom_step(reduce) > 1 and c.a_reduction is not None:
            loop = next(lp for lp in T.enclosing_loops(reduce) if "atom" in lp.attributes)
            rows, cols = (e // w for e, w in zip(loop.extents, loop.attributes["warps"]))
            chunk = ATTENTION_MMA_KEYS
            while chunk > 16 and rows * (chunk + cols) // target().warp_size > ATTENTION_MMA_REGISTERS:
                chunk //= 2
            if rows in fragments.TOP_ROWS:  # decode: slabs small enough for many blocks a multiprocessor
                chunk = max(16, min(chunk, DECODE_MMA_SLAB_BYTES // (cols * size)))
            if fragments.Atom.parse(loop.attributes["atom"]).family == "wgmma":
                e = c.a_reduction.extents[0]  # K's head dimension (V's is `cols`)
                q = loop.extents[0] * e * size
                share = target().smem_per_sm // ATTENTION_WGMMA_BLOCKS_PER_SM
                while chunk > 16 and q + 2 * chunk * (e + cols) * size > share:  # Q, rings of 2 of K and V
                    chunk //= 2
            while k % chunk:
                chunk //= 2
            return chunk  # one chunk of all the keys too: the fold's unit (`fragments.folds_chunks`)
        while chunk > 1 and k % chunk:
            chunk //= 2
        return chunk if chunk < k else 1

    def split_across(self, kernel: T.KernelOp, reduce: T.ReduceOp) -> str:
        """What shares a split reduction: `warps` for decode attention on the atoms' top halves whose blocks fill a
        wave already (DECODE_SLICE_WARPS), else `blocks`."""
        blocks = kernel.axis_size("blockIdx.x") * kernel.axis_size("blockIdx.y") * kernel.axis_size("blockIdx.z")
        sms = target().sm_count
        decode = _recomputes_a_in(reduce) and _tensorized_tile(reduce) in fragments.TOP_ROWS
        fills = WAVE_FILL * sms <= blocks <= sms
        if decode and fills and reduce.extents[0] // DECODE_SLICE_WARPS >= ATTENTION_MIN_SHARE:
            return "warps"
        return "blocks"

    def warp_splits(self, kernel: T.KernelOp, reduce: T.ReduceOp) -> int:
        """Warps sharing one reduction sliced among them (`split_across`)."""
        return DECODE_SLICE_WARPS

    def reduce_splits(self, kernel: T.KernelOp, reduce: T.ReduceOp) -> int:
        """Blocks sharing one reduction. A contraction's: the split whose block count comes nearest (by ratio;
        the larger on a tie) to SPLIT_BLOCKS_PER_SM blocks for each multiprocessor, and at least DEEP_SPLIT while
        the kernel has fewer than DEEP_SPLIT_WAVES blocks per multiprocessor and each share keeps DEEP_SHARE
        trips; never a share under MIN_SHARE trips (its chunks are staged: the pipeline needs trips to fill). A
        block of small register tiles holds two warps, so a few blocks per multiprocessor leave it short of warps
        to switch between: sweep 5 of bench/results/contraction_sweep-h100-2026-11-24 ran 16 and 64 output tiles
        best at 256 blocks (split 16 and 4), 176 to 1024 tiles best or level at split 4 (deeper splits there cut
        shares under DEEP_SHARE chunks). Where K is long enough that deeper shares keep DEEP_SHARE chunks, deeper
        as far as one wave of resident blocks: the s = 128 products of K = 5632 and 18944 took 4 ways (256 and 448
        blocks: 2 to 3.4 blocks, 4 to 7 warps a multiprocessor, where the s = 512 products' 12 warps reach
        0.9x cuBLAS) and take 8 (512 and 896); as far as LONG_SPLIT_WAVES waves where shares keep LONG_SHARE chunks:
        the K = 18944 ones take 16 (1792 blocks, 74 chunks a share), 0.86x -> 0.94x of cuBLAS in sweep 7
        (bench/results/contraction_sweep-h100-2026-11-26/sweep7), where 8 ways of K = 5632 at s = 512 (44 chunks a
        share, two waves) ran slower than 4. A long row's
        (split-row): when the rows fill less than half the multiprocessors, enough blocks per row for a full wave
        of resident blocks (a row's pass reads at DRAM speed only with every multiprocessor's threads loading), each
        share at least MIN_ROW_SHARE elements. Attention's prefill (A computed in the element, blocks of a warp or
        more) aims at one block per multiprocessor, as each share stores a whole partial O. A tensor-core tile of
        TILE_ROWS_ONE_WAVE rows or more (prefill) splits only as far as filling the multiprocessors once, and not
        at all where its blocks already make a wave WAVE_FILL full: its partials would cost more traffic than its
        inputs; a thinner one (decode) streams its weight like the SIMT path."""
        blocks = kernel.axis_size("blockIdx.x") * kernel.axis_size("blockIdx.y") * kernel.axis_size("blockIdx.z")
        trips = reduce.extents[0]
        sms = target().sm_count
        if contraction_of(reduce) is None and not _holds_contraction(reduce):
            if 2 * blocks >= sms or trips < 2 * MIN_ROW_SHARE:
                return 1
            wave = sms * max(1, target().max_threads_per_sm // kernel.threads)
            best = 1
            for s in SPLITS:
                if blocks * best >= wave:
                    break
                if trips % s == 0 and trips // s >= MIN_ROW_SHARE:
                    best = s
            return best
        if _recomputes_a_in(reduce) and kernel.threads < target().warp_size:
            return _decode_attention_splits(blocks, trips, sms)
        if _recomputes_a_in(reduce) and _tensorized_tile(reduce) in fragments.TOP_ROWS:
            return _nearest_share_split(trips, ATTENTION_MIN_SHARE, blocks, DECODE_MMA_BLOCKS_PER_SM * sms)
        fits = _splits_of(trips)
        if _recomputes_a_in(reduce) and kernel.threads >= target().warp_size:
            if "threadIdx.y" in T.bound_axes(reduce):  # rows of lanes sharing their scores (`row_lanes`)
                return self._attention_splits(kernel, reduce, blocks)
            return min(fits, key=lambda s: (abs(math.log(blocks * s / sms)), -s))
        if _tensorized_tile(reduce) >= TILE_ROWS_ONE_WAVE:
            if blocks >= WAVE_FILL * sms:
                return 1
            return min((s for s in fits if blocks * s >= sms), default=max(fits))
        nearest = min(fits, key=lambda s: (abs(math.log(blocks * s / (SPLIT_BLOCKS_PER_SM * sms))), -s))
        if blocks >= DEEP_SPLIT_WAVES * sms:
            return nearest
        wave = sms * max(1, target().registers_per_sm // (kernel.threads * CONTRACTION_REGISTERS))
        deep = max(
            (
                s
                for s in fits
                if trips // s >= DEEP_SHARE
                and (
                    s <= DEEP_SPLIT
                    or blocks * s <= wave
                    or (trips // s >= LONG_SHARE and blocks * s <= LONG_SPLIT_WAVES * wave)
                )
            ),
            default=1,
        )
        return max(nearest, deep)

    def _attention_splits(self, kernel: T.KernelOp, reduce: T.ReduceOp, blocks: int) -> int:
        """Blocks sharing the keys of an attention-shaped contraction whose rows' lanes share the scores: the
        split (any divisor of its chunks) whose warps come nearest (by ratio; the larger on a tie) to
        ATTENTION_WARPS_PER_SM a multiprocessor, shares of MIN_SHARE chunks at least (ATTENTION_MIN_SHARE where
        bound by memory); at decode (`_decode_attention`), the blocks nearest ATTENTION_DECODE_BLOCKS_PER_SM a
        multiprocessor, shares of DECODE_MIN_SHARE_KEYS keys at least."""
        trips = reduce.extents[0]
        least = ATTENTION_MIN_SHARE if _attention_bound_by_memory(reduce) else MIN_SHARE
        decode = _decode_attention(reduce)
        if decode:  # a trip's keys: its chunk's (the reduction inside it whose results it yields), else one
            chunks = [r for r in reduce.body.ops if isinstance(r, T.ReduceOp) and tuple(r.results) == reduce.yielded]
            keys = chunks[0].extents[0] if chunks else 1
            least = max(least, -(-DECODE_MIN_SHARE_KEYS // keys))
        if decode:
            return _nearest_share_split(trips, least, blocks, ATTENTION_DECODE_BLOCKS_PER_SM * target().sm_count)
        warps = blocks * max(1, kernel.threads // target().warp_size)
        return _nearest_share_split(trips, least, warps, ATTENTION_WARPS_PER_SM * target().sm_count)

    def tensor_atom(self, kernel: T.KernelOp, root, rows, cols) -> str | None:
        """The atom family the contraction under `root` runs on, over output indices `rows` and `cols`: "wgmma" on
        sm_90a for prefill-sized products (WGMMA_MIN_ROWS rows) whose factors wgmma can read from shared memory
        (K-major loads, no prologue), else "mma";
        None keeps it on the SIMT path: the target has no tensor cores,
        the products are not of 16-bit floats (`fragments.operands` says why), or the product is decode-shaped
        (fewer than TENSOR_MIN_ROWS rows or columns in all: streaming the weight is split-K's business)."""
        if not target().has("ldmatrix"):
            return None
        ops = fragments.operands(root, rows, cols)
        if isinstance(ops, str):
            return None
        c = ops.contraction
        sizes = [math.prod(iv.block.parent_op.extents[iv.index] for iv in side) for side in (c.m, c.n)]
        if min(sizes) < TENSOR_MIN_ROWS:
            return None
        wgmma = target().has("wgmma") and sizes[0] >= WGMMA_MIN_ROWS and fragments.why_not_descriptors(ops) is None
        return "wgmma" if wgmma else "mma"

    def attention_atom(self, kernel: T.KernelOp, root, rows, cols) -> str | None:
        """The atom attention's two products run on, over query rows `rows` and head columns `cols`: "mma" where
        the target has mma.sync, `fragments.attention_operands` takes the products (16-bit factors, keys in steps
        of 16, the key computed from the scores and indices), the head dimension is a multiple of 16 and the
        queries come in blocks of 16 rows a warp (prefill) or are a few (`fragments.TOP_ROWS`; decode: a GQA
        group's heads at one position, on the atoms' top halves); "wgmma" in place of "mma" where
        `_attention_on_wgmma` holds and the block's warps are warpgroups of 16 rows a warp; None keeps it on the
        SIMT path (other shapes)."""
        ops = fragments.attention_operands(root, rows, cols)
        if not target().has("ldmatrix") or isinstance(ops, str):
            return None
        m, n = (iv.block.parent_op.extents[iv.index] for iv in (rows, cols))
        rows_ok = m % (16 * ATTENTION_MMA_WARPS) == 0 or m in fragments.TOP_ROWS
        if not (rows_ok and n % 16 == 0):
            return None
        warps = (kernel.threads // target().warp_size, 1)
        atom = fragments.wgmma_atom((m, n))
        if _attention_on_wgmma(ops, n) and atom is not None and fragments.why_not_layout((m, n), warps, atom) is None:
            return "wgmma"
        return "mma"

    def warp_grid(self, kernel: T.KernelOp, loop: T.ForOp, atom) -> tuple[int, int] | None:
        """Warps along the rows and the columns of a tensorized loop's tile (their product: the block's threads
        over 32): the squarest warp tiles the atom allows, wider along the columns; None when none fits."""
        warps = kernel.threads // target().warp_size
        fits = [
            (w, warps // w)
            for w in range(1, warps + 1)
            if warps % w == 0 and fragments.why_not_layout(loop.extents, (w, warps // w), atom, top=False) is None
        ]
        ratio = lambda g: abs(math.log2((loop.extents[0] / g[0]) / (loop.extents[1] / g[1])) + 0.5)
        return min(fits, key=ratio, default=None)

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
            return banks.descriptor_layout(stage) is not None  # wgmma reads it in the layout the engine writes
        engine = [{"copy": "tma", "pad": 0, "swizzle": sw} for sw in ((), banks.tma_layout(stage)) if sw is not None]
        copy = "async" if target().has("cp.async") else "sync"
        threads = [{"copy": copy, "pad": 0, "swizzle": ()}]
        threads += [{"copy": copy, "pad": p, "swizzle": ()} for p in self.smem_pads(kernel, stage)]
        threads += [{"copy": copy, "pad": 0, "swizzle": sw} for sw in self.smem_swizzles(kernel, stage)]
        w = banks.Weigher(stage)
        now = w.cost()
        best = []
        for layouts in (engine, threads):
            fine = [c for c in (banks.evaluate(stage, a, now, w) for a in layouts) if c.why_not is None]
            best.append(min((c.cost.wavefronts for c in fine), default=float("inf")))
        return best[0] <= best[1]

    # ---- block order and unrolling --------------------------------------------------------------------------------
    def raster_candidates(self, kernel: T.KernelOp, band: T.ForOp) -> tuple[int, ...]:
        """Rows of blocks tile-rasterize weighs grouping a band's work items by (those dividing its rows)."""
        rows = band.layout.work_grid[-2]
        return tuple(r for r in RASTER_ROWS if rows % r == 0)

    def l2_bytes(self) -> int:
        """L2 capacity the block-order model counts on: half the target's (H100's L2 is two partitions; a block
        reading the far one goes through both), the rest for the outputs and everything else."""
        return target().l2_bytes // 2

    def unroll_ops(self, kernel: T.KernelOp, loop: T.LoopOp) -> int:
        """Most register-tile element operations an innermost loop may unroll fully to (tile-unroll)."""
        return UNROLL_OPS


def _attention_rows(reduce: T.ReduceOp) -> tuple[int, int] | None:
    """(query rows a block shares each K/V element with, the element's bytes) of the attention-shaped contraction
    in `reduce`; None where it has none."""
    c = next((c for r in reduce.walk() if isinstance(r, T.ReduceOp) for c in [contraction_of(r)] if c), None)
    loop = next((lp for lp in T.enclosing_loops(reduce) if any(a in T.THREAD_AXES for a in lp.bind)), None)
    if c is None or loop is None or not c.b:
        return None
    rows = math.prod(e for e, iv in zip(loop.extents, loop.ivs) if iv in c.m)
    return rows, min(ld.buffer.type.dtype.bytes for ld in c.b)


def _attention_bound_by_memory(reduce: T.ReduceOp) -> bool:
    """Whether the attention-shaped contraction in `reduce` does fewer than SIMT_FLOPS_PER_BYTE flops per byte of
    its B factor (K and V): 2 per query row a block shares each element with, over the element's bytes."""
    rows = _attention_rows(reduce)
    return rows is not None and _memory_bound(*rows)


def _memory_bound(rows: int, size: int) -> bool:
    return 2 * rows / size < SIMT_FLOPS_PER_BYTE


def _decode_attention(reduce: T.ReduceOp) -> bool:
    """Whether `reduce` holds decode attention: bound by memory, DECODE_ROWS query rows a block at most (a KV
    head's query heads at one position; f32 prefill in blocks of 32 rows is bound by memory too, and ran slower on
    decode's rings and splits: seed84's sdpa.TL.s512 80 -> 86 us)."""
    rows = _attention_rows(reduce)
    return rows is not None and rows[0] <= DECODE_ROWS and _memory_bound(*rows)


def _simt_columns(bm: int, n: int) -> int:
    """A SIMT tile's columns for `bm` rows: 64 beside 64 rows (64 x 64 tiles of 64 threads), else up to 128."""
    return max((x for x in ((64,) if bm == 64 else (128, 64)) + (32, 16, 8) if n % x == 0), default=1)


def _wave_columns(row_tiles: int, n: int, lo: int, hi: int, fill: float) -> int | None:
    """The columns of a wgmma tile over N (`row_tiles` tiles of rows, all batches together): a multiple of 16 from
    `lo` to `hi` dividing N whose tiles fill `fill` of the multiprocessors at least, the one whose busiest
    multiprocessor computes the fewest columns (blocks in waves of sm_count, each wave as long as its tiles are
    wide), the widest on a tie; None where none fills them. L7 (N = 4608, 16 row tiles): 288 tiles of 256
    columns run in 3 waves, the last 18% full (768 columns a multiprocessor); 384 of 192 in 3 full ones (576)."""
    sms = target().sm_count
    cost = {
        bn: -(-(row_tiles * (n // bn)) // sms) * bn
        for bn in range(lo, hi + 1, 16)
        if n % bn == 0 and row_tiles * (n // bn) >= fill * sms
    }
    return min(cost, key=lambda bn: (cost[bn], -bn)) if cost else None


def _splits_of(trips: int) -> list[int]:
    """The splits a reduction of `trips` trips may take: dividing it, each share MIN_SHARE trips at least."""
    return [s for s in (1, *SPLITS) if trips % s == 0 and (s == 1 or trips // s >= MIN_SHARE)]


def _thread_outputs(loop: T.ForOp) -> int:
    """Outputs a thread's register tile may hold on the SIMT path: THREAD_OUTPUTS accumulators over the carriers
    of the loop's contraction."""
    c = contractions_in(loop)
    return max(1, THREAD_OUTPUTS // max(1, len(c[0].reduce.results) if c else 1))


def _recomputes_a(loop: T.ForOp) -> bool:
    """Whether the loop's points are a contraction's outputs whose A factor a reduction computes in the element
    (attention's scores, inside P @ V): a work item computes each A element once for all its points along N."""
    return any(c.a_reduction is not None for c in contractions_in(loop))


def _recomputes_a_in(reduce: T.ReduceOp) -> bool:
    """Whether `reduce` is (or holds the chunks of) a contraction whose A factor a reduction computes."""
    return any(
        c.a_reduction is not None
        for r in reduce.walk()
        if isinstance(r, T.ReduceOp)
        for c in [contraction_of(r)]
        if c is not None
    )


def _attention_on_wgmma(ops: fragments.AttentionOperands, head: int) -> bool:
    """Whether attention's products can run on wgmma, warps of 16 rows aside: the target has it, the head dimension
    is a wgmma's N (8 to 256) and V's rows are one swizzle span or whole 128-byte spans in blocks (an MN-major
    descriptor's), K and V tiles that descriptors name."""
    return (
        target().has("wgmma")
        and fragments.wgmma_atom((64, head)) is not None
        and row_blocks(head * ops.dtype.bytes) is not None
        and fragments.why_not_attention_descriptors(ops) is None
    )


def _attention_on_atoms(kernel: T.KernelOp) -> bool:
    """Whether the kernel computes attention's products on tensor-core atoms (`tile-tensorize`)."""
    return any(
        isinstance(lp, T.ForOp)
        and "atom" in lp.attributes
        and isinstance(fragments.any_operands(lp, *lp.ivs), fragments.AttentionOperands)
        for lp in kernel.walk()
    )


def _wgmma_loops(kernel: T.KernelOp) -> list[T.ForOp]:
    """The kernel's loops laid out on a wgmma atom."""
    return [
        lp for lp in kernel.walk() if isinstance(lp, T.ForOp) and str(lp.attributes.get("atom", "")).startswith("wgmma")
    ]


def _wgmma_columns(loop: T.ForOp) -> int:
    """Columns of B slabs a trip of a wgmma tile's K loop multiplies: the tile's, once per carrier (a gated
    product's gate and up make a 128 x 128 tile as wide as a 128 x 256 one)."""
    reduces = [r for r in loop.walk() if isinstance(r, T.ReduceOp) and contraction_of(r) is not None]
    return loop.extents[1] * max((len(r.results) for r in reduces), default=1)


def _sliced_attention(kernel: T.KernelOp) -> bool:
    """Attention on the atoms whose keys are sliced among the block's warps (`split_across`)."""
    sliced = any(isinstance(c, T.CombineOp) and c.over == ("threadIdx.y",) for c in kernel.walk())
    return sliced and _attention_on_atoms(kernel)


def _nearest_share_split(trips: int, least: int, units: int, aim: float) -> int:
    """The split of a reduction of `trips` trips over blocks, any divisor of them (cache lengths, prompt plus new
    tokens, rarely factor into SPLITS) leaving shares of `least` trips at least, whose `units` (blocks or warps)
    times it come nearest `aim` by ratio; the larger on a tie."""
    fits = [s for s in range(1, trips + 1) if trips % s == 0 and (s == 1 or trips // s >= least)]
    return min(fits, key=lambda s: (abs(math.log(units * s / aim)), -s))


def _decode_attention_splits(blocks: int, trips: int, sms: int) -> int:
    """Attention at decode: a block holds one KV head's few query rows (under a warp), each thread a row that walks
    its share of the cache serially (a dot product and an update of the whole head per position), so the time
    is the share's length: the cache is split as far as one block per multiprocessor allows, over any divisor of
    its chunks (the lengths a cache is compiled for, prompt plus new tokens, rarely factor into SPLITS), each
    share two chunks at least (tile-split-reduce's rule)."""
    return max((s for s in range(2, trips) if trips % s == 0 and blocks * s <= sms), default=1)


def _tensorized_tile(reduce: T.ReduceOp) -> int:
    """Rows of the tensor-core output tile `reduce` (a contraction, or a chunk loop holding one) accumulates; 0 off
    the tensor cores."""
    loop = next((lp for lp in T.enclosing_loops(reduce) if "atom" in lp.attributes), None)
    return loop.extents[0] if loop is not None and len(loop.extents) == 2 else 0


def _holds_contraction(reduce: T.ReduceOp) -> bool:
    """A chunked contraction: the reduction whose trips hold the contraction's chunks."""
    return any(contraction_of(r) is not None for r in reduce.walk() if isinstance(r, T.ReduceOp) and r is not reduce)


_CURRENT = Heuristic()


def heuristic() -> Heuristic:
    return _CURRENT


def set_heuristic(h: Heuristic) -> Heuristic:
    """Use `h` from now on; returns the previous one (to restore)."""
    global _CURRENT
    old, _CURRENT = _CURRENT, h
    return old


# tile-persistent's default: tiles a resident block may walk. On an H100 (bench/results/persistent-h100-2026-11-27)
# L2's 7.76 tiles a block ran 4% faster resident, L7's 1.94 3%; L9's 17.9 1% (4.7% on an H200), while the Qwen2.5
# decoder layer (D4), whose gated gate/up product walks 17.9, ran 4-7% slower with every kernel resident.
PERSISTENT_TILES = 8

THREAD_CHOICES = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# powers of two, and multiples of 16 past 32: wgmma's N comes in steps of 8, and a tile of 192 or 224 columns can
# cut N into whole waves of blocks where 256 leaves the last wave mostly idle (heuristics._wgmma_tile)
TILE_CHOICES = (0, 1, 2, 4, 8, 16, 32, *range(48, 257, 16))
