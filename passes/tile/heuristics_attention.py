"""The default schedule of attention-shaped contractions: row lanes, block rows, atoms, and attention's constants."""

from __future__ import annotations

import math

from irforge.dialects import tile as T
from irforge.dialects.kernel.warpgroup import row_blocks
from irforge.dialects.tile import fragments
from irforge.dialects.tile.algebra import contraction_of, contractions_in

from irforge.target import target

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


class AttentionHeuristic:
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


def _sliced_attention(kernel: T.KernelOp) -> bool:
    """Attention on the atoms whose keys are sliced among the block's warps (`split_across`)."""
    sliced = any(isinstance(c, T.CombineOp) and c.over == ("threadIdx.y",) for c in kernel.walk())
    return sliced and _attention_on_atoms(kernel)
