"""Asynchronous copies: a cp.async double-buffered ring, and TMA boxes completing on an mbarrier (swizzled or
not)."""

from __future__ import annotations

import numpy as np

from .base import Example, _header, _rand


def cp_async_scale(n: int, tiles_per_block: int = 4, block: int = 64, *, second_barrier: bool = True) -> Example:
    """out = 2 * x through a two-stage shared-memory ring filled by cp.async (prefetch tile k + 1 while tile k is
    used); each thread reads what its neighbour copied, so the barriers matter. `second_barrier=False` plants the
    classic bug (the next prefetch overwrites a stage other threads are still reading)."""
    tile = block * 4
    per_block = tile * tiles_per_block
    assert n % per_block == 0, f"n must be a multiple of {per_block}"
    tail = "    kernel.barrier\n" if second_barrier else ""
    head = _header(
        "k_cp_async_scale", ["%x: !kernel.ptr<f32>", "%out: !kernel.ptr<f32>"], f"{n // per_block}", f"{block}"
    )
    ir = f"""{head} {{
  %stage = kernel.smem f32[2,{tile}]
  %t = kernel.thread_id x
  %blk = kernel.block_id x
  %two = kernel.const 2.0 : f32
  kernel.cp_async %x[%blk * {per_block} + %t * 4] -> %stage[0, %t * 4] : f32[4]
  kernel.cp_async_commit
  kernel.for %k in 0 .. {tiles_per_block} {{
    %next = kernel.index %k + 1
    %last = kernel.const {tiles_per_block} : index
    %more = kernel.lt %next, %last : bool
    kernel.if %more {{
      kernel.cp_async %x[%blk * {per_block} + %next * {tile} + %t * 4] -> %stage[%next mod 2, %t * 4] : f32[4]
    }}
    kernel.cp_async_commit
    kernel.cp_async_wait 1
    kernel.barrier
    %src = kernel.index (%t + 1) mod {block}
    %v = kernel.load %stage[%k mod 2, %src * 4] : f32[4]
    %v2 = kernel.mul %v, %two : f32[4]
    kernel.store %v2, %out[%blk * {per_block} + %k * {tile} + %src * 4]
{tail}  }}
}}
func.func @forward(%x: f32[{n}]) -> f32[{n}] {{
  %out = kernel.alloc : f32[{n}]
  kernel.launch @k_cp_async_scale(%x, %out)
  func.return %out
}}
"""
    return Example(
        "cp_async_scale",
        ir,
        lambda rng: [_rand(rng, (n,), "f32")],
        lambda ins: [2.0 * ins[0].astype(np.float64)],
        1e-6,
        8 * n,
        lambda x: [2 * x],
    )


def tma_scale(
    rows: int, cols: int, box_rows: int = 8, box_cols: int = 32, block: int = 64, swizzle: int = 0
) -> Example:
    """out = 2 * x (bf16 in, f32 out): thread 0 asks the copy engine for a box of a 2-D bf16 tensor, every thread
    waits on the mbarrier, then reads the box from shared memory. With `swizzle` (the box's row bytes: 32, 64 or
    128), the copy engine writes the box swizzled and the reads go through the same swizzle."""
    assert rows % box_rows == 0 and cols % box_cols == 0
    box = box_rows * box_cols
    tmap = f"!kernel.tensormap<bf16, [{rows}, {cols}], [{box_rows}, {box_cols}]{f', {swizzle}' if swizzle else ''}>"
    head = _header(
        "k_tma_scale" + (f"_sw{swizzle}" if swizzle else ""),
        [f"%xm: {tmap}", "%out: !kernel.ptr<f32>"],
        f"{cols // box_cols}, {rows // box_rows}",
        f"{block}",
    )
    sw = f" swizzle({(swizzle // 16).bit_length() - 1}, 3, 3)" if swizzle else ""
    ir = f"""{head} {{
  %tile = kernel.smem bf16[{box_rows},{box_cols}]{sw}
  %full = kernel.smem mbarrier[1]
  %t = kernel.thread_id x
  %bx = kernel.block_id x
  %by = kernel.block_id y
  %c0 = kernel.const 0 : index
  %leader = kernel.eq %t, %c0 : bool
  kernel.if %leader {{
    kernel.mbarrier_init %full[0], 1
  }}
  kernel.barrier
  kernel.if %leader {{
    kernel.mbarrier_arrive %full[0] expect_tx {box * 2}
    kernel.tma_load %xm[%by * {box_rows}, %bx * {box_cols}] -> %tile, %full[0]
  }}
  kernel.mbarrier_wait %full[0], parity 0
  %two = kernel.const 2.0 : f32
  kernel.for %e in %t .. {box} step {block} {{
    %v = kernel.load %tile[%e floordiv {box_cols}, %e mod {box_cols}] : bf16
    %f = kernel.cast %v : bf16 to f32
    %f2 = kernel.mul %f, %two : f32
    kernel.store %f2, %out[(%by * {box_rows} + %e floordiv {box_cols}) * {cols} + %bx * {box_cols} + %e mod {box_cols}]
  }}
}}
func.func @forward(%x: bf16[{rows},{cols}]) -> f32[{rows},{cols}] {{
  %out = kernel.alloc : f32[{rows},{cols}]
  kernel.launch @k_tma_scale{f"_sw{swizzle}" if swizzle else ""}(%x, %out)
  func.return %out
}}
"""
    return Example(
        "tma_scale" + (f"_sw{swizzle}" if swizzle else ""),
        ir,
        lambda rng: [_rand(rng, (rows, cols), "bf16")],
        lambda ins: [2.0 * ins[0].astype(np.float64)],
        1e-6,
        rows * cols * (2 + 4),
        lambda x: [2 * x.float()],
    )
