"""The default schedule of contractions: block and register tiles, tensor-core atoms and warp grids, chunks of K."""

from __future__ import annotations

import math

from irforge.dialects import tile as T
from irforge.dialects.tile import fragments
from irforge.dialects.tile.algebra import contraction_of, contractions_in
from irforge.passes.tile.heuristics_attention import (
    ATTENTION_MMA_KEYS,
    ATTENTION_MMA_NARROW_HEAD,
    ATTENTION_MMA_REGISTERS,
    ATTENTION_MMA_WARP_ROWS,
    ATTENTION_MMA_WARPS,
    ATTENTION_WGMMA_BLOCKS_PER_SM,
    DECODE_MMA_SLAB_BYTES,
    SCORE_THREADS,
    _attention_on_wgmma,
    _recomputes_a,
)
from irforge.passes.tile.heuristics_splits import DEEP_SPLIT, TILE_ROWS_ONE_WAVE, WAVE_FILL, _splits_of

from irforge.target import target

# Contractions on the SIMT path: a thread computes a register tile of up to THREAD_OUTPUTS outputs (8 x 8: 64
# accumulators, with the operand fragments and addresses about 128 registers, two blocks of 256 threads an SM),
# over all its carriers (SiLU * up's two accumulators of 8 x 8 took 255 registers and spilled 24 stores in f32);
# the reduction is staged K_CHUNK_BYTES of each row at a time, in RING stages (PREFETCH of them in flight).
THREAD_OUTPUTS = 64
CONTRACTION_THREADS = 256
FILL_THREAD_OUTPUTS = 4  # outputs a thread of a tile shrunk to fill the GPU (contraction_tile)
K_CHUNK_BYTES = 64
RASTER_THREADS = False  # see warp_rows
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


class ContractionHeuristic:
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


def _thread_outputs(loop: T.ForOp) -> int:
    """Outputs a thread's register tile may hold on the SIMT path: THREAD_OUTPUTS accumulators over the carriers
    of the loop's contraction."""
    c = contractions_in(loop)
    return max(1, THREAD_OUTPUTS // max(1, len(c[0].reduce.results) if c else 1))


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
