"""The default schedule's threads and vectors of reductions and elementwise loops, its block order and unrolling."""

from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.tile.algebra import contraction_of, contractions_in

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


class ThreadHeuristic:
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
