"""Hand-written kernel-level programs with numpy references, at any size.

They exercise every family of kernel ops (vector accesses, strided loops with carries, shuffles, shared-memory trees,
the online-softmax carrier, cp.async double buffering, TMA + mbarrier, mma fragments) and serve three users: the
simulator tests (tiny sizes), the CUDA emitter tests (NVRTC compiles each), and the GPU smoke script and
memory-bound benchmarks (real sizes, compared with torch). Each builder returns an `Example`: the IR text, an input
generator and a float64 reference.

The builders live in modules by family: `elementwise`, `reductions` (through shared memory), `register_rows` (the
same rows held in registers), `async_copies`, `tensor_cores`; `base` has `Example` and the helpers they share.
"""

from __future__ import annotations

from .async_copies import cp_async_scale, tma_scale
from .base import Example
from .elementwise import silu_mul, vector_add
from .reductions import rms_norm, row_sum, softmax
from .register_rows import rms_norm_registers, softmax_registers
from .tensor_cores import ldmatrix_mma, mma_linear, wgmma_linear, wgmma_registers_a

__all__ = [
    "Example",
    "cp_async_scale",
    "gpu_examples",
    "ldmatrix_mma",
    "mma_linear",
    "rms_norm",
    "rms_norm_registers",
    "row_sum",
    "silu_mul",
    "softmax",
    "softmax_registers",
    "tiny_examples",
    "tma_scale",
    "vector_add",
    "wgmma_linear",
    "wgmma_registers_a",
]


def tiny_examples() -> list[Example]:
    """Every example at a size the simulator runs in well under a second each."""
    return [
        vector_add(1024, "f32"),
        vector_add(2048, "bf16"),
        silu_mul(4, 256, "bf16", block=32),
        row_sum(3, 200, block=128),
        rms_norm(2, 512, "f32", block=64),
        rms_norm(2, 1024, "bf16", block=64),
        softmax(2, 512, "f32", block=64),
        softmax(2, 1024, "bf16", block=128),
        rms_norm_registers(3, 256, "f32", block=32),
        rms_norm_registers(2, 256, "bf16", block=32),
        softmax_registers(3, 256, "f32", block=32),
        softmax_registers(2, 512, "bf16", block=32),
        cp_async_scale(1024, tiles_per_block=4, block=64),
        tma_scale(16, 64, box_rows=8, box_cols=32, block=64),
        tma_scale(16, 128, box_rows=8, box_cols=32, block=64, swizzle=64),
        tma_scale(32, 128, box_rows=16, box_cols=64, block=64, swizzle=128),
        mma_linear(32, 16, 48),
        ldmatrix_mma(32, 24, 32, a_t=False, b_t=True),
        ldmatrix_mma(16, 16, 32, a_t=True, b_t=False, dtype="f16"),
        wgmma_linear(16, 128, bk=64),
        wgmma_linear(24, 64, bk=32, dtype="f16"),
        wgmma_linear(8, 32, bk=16, warpgroups=2),
        wgmma_registers_a(64, 128, bk=64),
        wgmma_registers_a(32, 32, bk=16, dtype="f16", warpgroups=2),
        wgmma_registers_a(16, 64, bk=32),
        wgmma_registers_a(128, 32, bk=16),
    ]


def gpu_examples() -> list[Example]:
    """The same kernels at sizes that fill an H100 (for the GPU smoke script)."""
    return [
        vector_add(1 << 24, "f32", block=256),
        vector_add(1 << 24, "bf16", block=256),
        silu_mul(4096, 11008, "bf16"),
        row_sum(4096, 4096, block=256),
        rms_norm(4096, 4096, "f32"),
        rms_norm(4096, 4096, "bf16"),
        softmax(4096, 4096, "f32"),
        softmax(4096, 4096, "bf16"),
        rms_norm_registers(4096, 4096, "f32"),
        rms_norm_registers(4096, 4096, "bf16"),
        softmax_registers(4096, 4096, "f32"),
        softmax_registers(4096, 4096, "bf16"),
        softmax_registers(28 * 2048, 2048, "bf16"),
        cp_async_scale(1 << 22, tiles_per_block=8, block=128),
        tma_scale(4096, 4096, box_rows=32, box_cols=64, block=256),
        tma_scale(4096, 4096, box_rows=32, box_cols=64, block=256, swizzle=128),
        mma_linear(256, 256, 512),
        ldmatrix_mma(64, 64, 256, a_t=False, b_t=True),
        ldmatrix_mma(64, 32, 128, a_t=True, b_t=False, dtype="f16"),
        wgmma_linear(192, 4096, bk=64, warpgroups=2),
        wgmma_linear(128, 1024, bk=32, dtype="f16"),
        wgmma_registers_a(64, 4096, bk=64, warpgroups=2),
        wgmma_registers_a(32, 1024, bk=32, dtype="f16"),
        wgmma_registers_a(128, 4096, bk=64, warpgroups=2),
    ]
