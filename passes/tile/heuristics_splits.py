"""The default schedule's splits of a reduction over blocks or warps (split-K, split rows, attention's keys)."""

from __future__ import annotations

import math

from irforge.dialects import tile as T
from irforge.dialects.tile import fragments
from irforge.dialects.tile.algebra import contraction_of
from irforge.passes.tile.heuristics_attention import (
    ATTENTION_DECODE_BLOCKS_PER_SM,
    ATTENTION_MIN_SHARE,
    ATTENTION_WARPS_PER_SM,
    DECODE_MIN_SHARE_KEYS,
    DECODE_MMA_BLOCKS_PER_SM,
    DECODE_SLICE_WARPS,
    _attention_bound_by_memory,
    _decode_attention,
    _recomputes_a_in,
)

from irforge.target import target

SPLITS = (2, 3, 4, 6, 8, 12, 16, 24, 32)  # the blocks a reduction may be split over
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
WAVE_FILL = 0.9  # a wave of tiles this full is one: 128 tiles on 132 multiprocessors are not split further


class SplitHeuristic:
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


def _splits_of(trips: int) -> list[int]:
    """The splits a reduction of `trips` trips may take: dividing it, each share MIN_SHARE trips at least."""
    return [s for s in (1, *SPLITS) if trips % s == 0 and (s == 1 or trips // s >= MIN_SHARE)]


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
