"""Types of the kernel dialect: global pointers, tensor maps, shared-memory buffers, mbarriers, mma fragments.

Register tiles need no type of their own: a value of tensor type (`f32[4]`, `f32[2,4]`) at the kernel level is a
per-thread array of registers, and scalar ops apply to it elementwise (the emitter unrolls them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from irforge.types import DialectType, ScalarType, TensorType

from . import fragments


def _scalar(x, what: str) -> ScalarType:
    if not isinstance(x, ScalarType):
        raise ValueError(f"{what} must be a scalar type, got {x}")
    return x


def _dims(x, what: str, *, positive: bool = True) -> tuple[int, ...]:
    if not isinstance(x, tuple) or not x or any(not isinstance(d, int) or isinstance(d, bool) for d in x):
        raise ValueError(f"{what} must be a non-empty list of integers, got {x}")
    if positive and any(d <= 0 for d in x):
        raise ValueError(f"{what} must be positive, got {list(x)}")
    return x


@dataclass(frozen=True, slots=True)
class PtrType(DialectType):
    """`!kernel.ptr<f32>`: a kernel parameter pointing at a global-memory buffer of `dtype` elements."""

    name: ClassVar[str] = "kernel.ptr"
    dtype: ScalarType

    def __post_init__(self):
        _scalar(self.dtype, "!kernel.ptr's element type")


# The copy engine's swizzle modes (CU_TENSOR_MAP_SWIZZLE_32B, _64B, _128B): within each span of 8 x `span` bytes of
# shared memory, the 16-byte pieces of a `span`-byte row are permuted by XOR with the row's index in the span.
TMA_SWIZZLE_SPANS = (32, 64, 128)


def tma_swizzle(span: int, dtype: ScalarType) -> tuple[int, int, int]:
    """The `!kernel.smem` swizzle [B, M, S] (over element offsets) that the copy engine's `span`-byte swizzle mode
    writes: bits [4, 4 + B) of the byte address XOR bits [7, 7 + B), B = log2(span / 16)."""
    m = (16 // dtype.bytes).bit_length() - 1
    return ((span // 16).bit_length() - 1, m, 7 - 4)


@dataclass(frozen=True, slots=True)
class TensorMapType(DialectType):
    """`!kernel.tensormap<bf16, [4096, 4096], [64, 64]>`: a TMA descriptor over a row-major global tensor of
    `shape`, copying boxes of `box` elements (passed to the kernel by value, as a `__grid_constant__`); a fourth
    parameter, 32, 64 or 128, has the copy engine swizzle the box's rows of that many bytes as it writes them
    (`tma_swizzle`)."""

    name: ClassVar[str] = "kernel.tensormap"
    dtype: ScalarType
    shape: tuple
    box: tuple
    swizzle: int = 0

    @property
    def params(self) -> tuple:
        return (self.dtype, self.shape, self.box, self.swizzle) if self.swizzle else (self.dtype, self.shape, self.box)

    def __post_init__(self):
        _scalar(self.dtype, "!kernel.tensormap's element type")
        _dims(self.shape, "!kernel.tensormap's shape")
        _dims(self.box, "!kernel.tensormap's box")
        if len(self.shape) != len(self.box) or len(self.shape) > 5:
            raise ValueError("!kernel.tensormap's shape and box must have the same rank, at most 5")
        if any(b > 256 for b in self.box):
            raise ValueError("!kernel.tensormap's box dimensions must be at most 256")
        # The copy engine's rules: rows of the box and of the tensor are whole multiples of 16 bytes.
        if (self.box[-1] * self.dtype.bytes) % 16 or (self.shape[-1] * self.dtype.bytes) % 16:
            raise ValueError("!kernel.tensormap's innermost box and tensor dimensions must span multiples of 16 bytes")
        row = self.box[-1] * self.dtype.bytes
        if self.swizzle and (self.swizzle not in TMA_SWIZZLE_SPANS or row != self.swizzle):
            raise ValueError(
                f"!kernel.tensormap's swizzle must be {', '.join(map(str, TMA_SWIZZLE_SPANS))} bytes, the box's rows"
                f" ({row} bytes)"
            )

    @property
    def box_bytes(self) -> int:
        n = 1
        for b in self.box:
            n *= b
        return n * self.dtype.bytes


@dataclass(frozen=True, slots=True)
class SmemType(DialectType):
    """`!kernel.smem<f32, [2, 64, 65]>`: a shared-memory buffer, row-major; an optional third parameter
    `[B, M, S]` swizzles it (the element offset `o` is stored at `o ^ (((o >> (M + S)) & (2^B - 1)) << M)`)."""

    name: ClassVar[str] = "kernel.smem"
    dtype: ScalarType
    shape: tuple
    swizzle: tuple = ()

    def __post_init__(self):
        _scalar(self.dtype, "!kernel.smem's element type")
        _dims(self.shape, "!kernel.smem's shape")
        if self.swizzle:
            _dims(self.swizzle, "!kernel.smem's swizzle", positive=False)
            if len(self.swizzle) != 3 or any(s < 0 for s in self.swizzle):
                raise ValueError("!kernel.smem's swizzle must be [B, M, S] with non-negative integers")

    @property
    def params(self) -> tuple:
        return (self.dtype, self.shape, self.swizzle) if self.swizzle else (self.dtype, self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.bytes

    @property
    def strides(self) -> tuple[int, ...]:
        out, s = [], 1
        for d in reversed(self.shape):
            out.append(s)
            s *= d
        return tuple(reversed(out))

    @property
    def align(self) -> int:
        """Bytes the buffer's start is aligned to: 128, or a swizzled one's period (2^(B+M+S) elements) up to 1024
        bytes, so that the copy engine's swizzles (which repeat every 256, 512 or 1024 bytes of shared-memory
        addresses) are the buffer's own."""
        if not self.swizzle:
            return 128
        b, m, s = self.swizzle
        return max(128, min(1024, (1 << (b + m + s)) * self.dtype.bytes))


@dataclass(frozen=True, slots=True)
class MbarrierType(DialectType):
    """`!kernel.mbarrier<2>`: an array of `count` mbarriers in shared memory (8 bytes each)."""

    name: ClassVar[str] = "kernel.mbarrier"
    count: int

    def __post_init__(self):
        if not isinstance(self.count, int) or isinstance(self.count, bool) or self.count <= 0:
            raise ValueError(f"!kernel.mbarrier's count must be a positive integer, got {self.count}")

    @property
    def nbytes(self) -> int:
        return 8 * self.count


@dataclass(frozen=True, slots=True)
class FragType(DialectType):
    """`!kernel.frag<"a", bf16, [64, 16]>`: a warp's tensor-core operand tile ("a", "b") or accumulator ("acc"),
    spread over its lanes in the layout of a family (`fragments.py`): "mma" (the default, printed without it) for
    mma.sync's atoms, "wgmma" for a warpgroup's accumulator (`!kernel.frag<"acc", f32, [64, 256], "wgmma">`).
    Each lane holds `per_lane` elements."""

    name: ClassVar[str] = "kernel.frag"
    role: str
    dtype: ScalarType
    shape: tuple
    layout: str = "mma"

    def __post_init__(self):
        _scalar(self.dtype, "!kernel.frag's element type")
        _dims(self.shape, "!kernel.frag's shape")
        why = fragments.why_not(self.layout, self.role, self.shape)
        if why:
            raise ValueError(why)

    @property
    def params(self) -> tuple:
        base = (self.role, self.dtype, self.shape)
        return base if self.layout == "mma" else (*base, self.layout)

    @property
    def per_lane(self) -> int:
        return fragments.per_lane(self.layout, self.role, self.shape)

    @property
    def threads(self) -> int:
        """The threads that hold the fragment together (a warp, or a warpgroup)."""
        return fragments.THREADS[self.layout]

    def points(self, g, t, w=0) -> list[tuple]:
        """(row, col) of each of a lane's elements (`fragments.points`)."""
        return fragments.points(self.layout, self.role, self.shape, g, t, w)

    def with_dtype(self, dtype: ScalarType) -> FragType:
        return FragType(self.role, dtype, self.shape, self.layout)


TYPES = (PtrType, TensorMapType, SmemType, MbarrierType, FragType)


def element_type(t):
    """The scalar element type of a scalar, register tile or fragment."""
    if isinstance(t, (TensorType, FragType)):
        return t.dtype
    return t


def with_element_type(t, dtype: ScalarType):
    """`t` with its element type replaced (scalar, register tile or fragment)."""
    if isinstance(t, TensorType):
        return t.with_dtype(dtype)
    if isinstance(t, FragType):
        return t.with_dtype(dtype)
    return dtype


def per_thread_shape(t) -> tuple[int, ...]:
    """The shape of what one thread holds: () for a scalar, the tile's shape, or (per_lane,) for a fragment."""
    if isinstance(t, TensorType):
        return t.shape
    if isinstance(t, FragType):
        return (t.per_lane,)
    return ()
