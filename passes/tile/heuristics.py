"""The default schedule: what the tile passes choose when an option is left at 0 (the default), from the kernel's
shapes. It lives here, and only here, so it can be replaced (by the tuner's replay, or an experiment):

    from irforge.passes.tile import heuristics
    heuristics.set_heuristic(MyHeuristic())      # a subclass overriding some of the methods

Every answer is one of the option's declared values, so a schedule the heuristic picks is a point the tuner can
reach by writing the same options into the kernel's `tune` attribute. Memory-bound kernels drive the choices
(docs/dialects/tile.md): long reductions shared by a block, 256 threads per block, 16-byte vectors.
"""

from __future__ import annotations

from irforge.passes.tile.heuristics_attention import (
    ATTENTION_DECODE_BLOCKS_PER_SM,
    ATTENTION_MIN_SHARE,
    DECODE_BUSY_LANE_OUTPUTS,
    DECODE_LANE_OUTPUTS,
    DECODE_RING,
    DECODE_RING_BLOCKS_PER_SM,
    AttentionHeuristic,
)
from irforge.passes.tile.heuristics_contractions import TENSOR_MIN_ROWS, ContractionHeuristic
from irforge.passes.tile.heuristics_splits import SplitHeuristic
from irforge.passes.tile.heuristics_stages import RING, StageHeuristic
from irforge.passes.tile.heuristics_threads import RASTER_IN_L2, RASTER_MIN_SAVING, RASTER_ROWS, ThreadHeuristic

__all__ = [
    "ATTENTION_DECODE_BLOCKS_PER_SM",
    "ATTENTION_MIN_SHARE",
    "DECODE_BUSY_LANE_OUTPUTS",
    "DECODE_LANE_OUTPUTS",
    "DECODE_RING",
    "DECODE_RING_BLOCKS_PER_SM",
    "RASTER_IN_L2",
    "RASTER_MIN_SAVING",
    "RASTER_ROWS",
    "RING",
    "TENSOR_MIN_ROWS",
    "THREAD_CHOICES",
    "TILE_CHOICES",
    "Heuristic",
    "heuristic",
    "set_heuristic",
]


class Heuristic(ThreadHeuristic, ContractionHeuristic, AttentionHeuristic, SplitHeuristic, StageHeuristic):
    """Every decision of the default schedule, a method each, from the families' classes (heuristics_*.py)."""


_CURRENT = Heuristic()


def heuristic() -> Heuristic:
    return _CURRENT


def set_heuristic(h: Heuristic) -> Heuristic:
    """Use `h` from now on; returns the previous one (to restore)."""
    global _CURRENT
    old, _CURRENT = _CURRENT, h
    return old


THREAD_CHOICES = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# powers of two, and multiples of 16 past 32: wgmma's N comes in steps of 8, and a tile of 192 or 224 columns can
# cut N into whole waves of blocks where 256 leaves the last wave mostly idle (heuristics._wgmma_tile)
TILE_CHOICES = (0, 1, 2, 4, 8, 16, 32, *range(48, 257, 16))
