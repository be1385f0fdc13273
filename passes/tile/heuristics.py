"""The default schedule: what the tile passes choose when an option is left at 0 (the default), from the kernel's
shapes. It lives here, and only here, so it can be replaced (by the tuner's replay, or an experiment):

    from irforge.passes.tile import heuristics
    heuristics.set_heuristic(MyHeuristic())      # a subclass overriding some of the methods

Every answer is one of the option's declared values, so a schedule the heuristic picks is a point the tuner can
reach by writing the same options into the kernel's `tune` attribute. Memory-bound kernels drive the choices
(docs/dialects/tile.md): long reductions shared by a block, 256 threads per block, 16-byte vectors.
"""

from __future__ import annotations

from irforge.dialects import tile as T

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


def _pow2_floor(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def _pow2_ceil(n: int) -> int:
    return 1 << (max(n, 1) - 1).bit_length()


class Heuristic:
    def cooperative_threads(self, kernel: T.KernelOp, reduce: T.ReduceOp) -> int:
        """Threads along threadIdx.x that share `reduce` (1: it stays in one thread)."""
        n = reduce.extents[0]
        if n < MIN_COOPERATIVE:
            return 1
        loads = [op.operands[0].type.dtype for op in reduce.walk() if isinstance(op, T.LoadOp)]
        size = min((t.bytes for t in loads), default=4)
        return max(32, min(THREADS_PER_BLOCK, _pow2_floor(n * size // BYTES_PER_THREAD)))

    def band_threads(self, kernel: T.KernelOp, band: T.ForOp, axis: str) -> int:
        """Threads along `axis` a band's points are split over (1: the band stays one point per block).

        Along threadIdx.x (nothing inside shares the band's point): up to 256, no more than the points. Along y,
        below threads that share each point: rows per block filling 128 threads, dividing the points evenly (so a
        combine inside never waits for a row that has no point)."""
        points = band.work_items
        if axis == "threadIdx.x":
            return min(THREADS_PER_BLOCK, _pow2_ceil(points))
        per_point = kernel.threads
        rows = max(1, ROW_BLOCK_THREADS // per_point)
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

    def stage_budget(self, kernel: T.KernelOp) -> int:
        """Bytes of shared memory the kernel may use for staged inputs."""
        return STAGE_BYTES


_CURRENT = Heuristic()


def heuristic() -> Heuristic:
    return _CURRENT


def set_heuristic(h: Heuristic) -> Heuristic:
    """Use `h` from now on; returns the previous one (to restore)."""
    global _CURRENT
    old, _CURRENT = _CURRENT, h
    return old


THREAD_CHOICES = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
