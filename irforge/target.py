"""The hardware the schedule is made for: one object with every limit and rate the passes, heuristics, checks and
the emitter read, so a number like the 1024-thread block limit is written once.

    from irforge.target import target
    t = target()                       # the current target (an H100-class sm_90a by default)
    t.max_threads, t.smem_per_block, t.has("cp.async")

`use_target(t)` replaces it (a context manager), e.g. to lower for sm_80 in a test. Only facts live here; what to
do with them (tile sizes, stages) is `passes/tile/heuristics.py`'s business.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass(frozen=True)
class MmaAtom:
    """A tensor-core instruction shape: `m x n x k` per issue, operand and accumulator element types."""

    name: str
    m: int
    n: int
    k: int
    operands: tuple[str, ...]
    accumulator: str
    min_sm: int
    flops_per_s: float  # dense, on an H100 SXM, for the tuner's cost model


@dataclass(frozen=True)
class Target:
    """A CUDA GPU's limits (per block, per multiprocessor) and the features its arch has."""

    arch: str = "sm_90a"
    sm_count: int = 132
    warp_size: int = 32
    max_threads: int = 1024  # per block
    max_block: tuple[int, int, int] = (1024, 1024, 64)
    max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    smem_static: int = 48 * 1024  # per block without opting in
    smem_per_block: int = 227 * 1024  # per block with the dynamic opt-in
    smem_per_sm: int = 228 * 1024
    smem_banks: int = 32
    bank_bytes: int = 4
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    l2_bytes: int = 50 * 1024 * 1024
    # Rates (an H100 SXM's), for the tuner's cost model: what moves and computes how fast.
    clock_hz: float = 1.755e9
    dram_bytes_per_s: float = 3.35e12
    l2_bytes_per_s: float = 5.5e12  # into the multiprocessors
    smem_bytes_per_clock: int = 128  # per multiprocessor
    fp32_flops_per_s: float = 67e12  # fused multiply-adds on the CUDA cores, counted as two
    memory_latency_s: float = 600e-9
    launch_s: float = 3e-6  # a kernel launch's fixed cost
    atoms: tuple[MmaAtom, ...] = field(
        default=(
            MmaAtom("mma.sync.m16n8k16", 16, 8, 16, ("f16", "bf16"), "f32", 80, 495e12),  # half wgmma's rate
            MmaAtom("wgmma.m64nNk16", 64, 256, 16, ("f16", "bf16"), "f32", 90, 989e12),
        )
    )

    def atom_rate(self, family: str) -> float:
        """FLOP/s of the tensor-core instructions of a family (`mma`: mma.sync, `wgmma`)."""
        return next(a.flops_per_s for a in self.atoms if a.name.split(".")[0] == family)

    @property
    def sm(self) -> int:
        """The compute capability as a number (sm_90a -> 90)."""
        return int("".join(c for c in self.arch.removeprefix("sm_") if c.isdigit()))

    def has(self, feature: str) -> bool:
        """Whether the arch has a feature: `cp.async` (sm_80), `tma`, `mbarrier` (sm_90), `wgmma` (sm_90a)."""
        need = {"cp.async": 80, "ldmatrix": 80, "mbarrier": 80, "tma": 90, "wgmma": 90}[feature]
        return self.sm >= need and (feature != "wgmma" or self.arch.endswith("a"))


_CURRENT = Target()


def target() -> Target:
    return _CURRENT


@contextmanager
def use_target(t: Target) -> Iterator[Target]:
    """Lower for `t` inside the block (the previous target comes back after it)."""
    global _CURRENT
    old, _CURRENT = _CURRENT, t
    try:
        yield t
    finally:
        _CURRENT = old
