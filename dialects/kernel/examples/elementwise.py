"""Elementwise examples: a vector add and the SwiGLU gate, on 16-byte vectors."""

from __future__ import annotations

import numpy as np

from irforge.types import ScalarType

from .base import Example, _from_f32, _header, _rand, _to_f32, _tol, _vec


def vector_add(n: int, dtype: str = "f32", block: int = 128) -> Example:
    """c = a + b with 16-byte vector loads, one vector per thread."""
    v = _vec(dtype)
    per_block = block * v
    assert n % per_block == 0, f"n must be a multiple of {per_block}"
    ca, a32 = _to_f32("a32", "x", dtype, v)
    cb, b32 = _to_f32("b32", "y", dtype, v)
    cs, s_out = _from_f32("s_out", "s", dtype, v)
    head = _header(
        "k_vector_add",
        [f"%a: !kernel.ptr<{dtype}>", f"%b: !kernel.ptr<{dtype}>", f"%c: !kernel.ptr<{dtype}>"],
        f"{n // per_block}",
        f"{block}",
    )
    ir = f"""{head} {{
  %t = kernel.thread_id x
  %blk = kernel.block_id x
  %i = kernel.index %blk * {per_block} + %t * {v}
  %x = kernel.load %a[%i] : {dtype}[{v}]
  %y = kernel.load %b[%i] : {dtype}[{v}]
{ca}{cb}  %s = kernel.add %{a32}, %{b32} : f32[{v}]
{cs}  kernel.store %{s_out}, %c[%i]
}}
func.func @forward(%a: {dtype}[{n}], %b: {dtype}[{n}]) -> {dtype}[{n}] {{
  %c = kernel.alloc : {dtype}[{n}]
  kernel.launch @k_vector_add(%a, %b, %c)
  func.return %c
}}
"""
    return Example(
        f"vector_add_{dtype}",
        ir,
        lambda rng: [_rand(rng, (n,), dtype), _rand(rng, (n,), dtype)],
        lambda ins: [ins[0].astype(np.float64) + ins[1].astype(np.float64)],
        _tol(dtype),
        3 * n * ScalarType(dtype).bytes,
        lambda a, b: [a + b],
    )


def silu_mul(rows: int, cols: int, dtype: str = "f32", block: int = 256) -> Example:
    """out = silu(g) * u (the SwiGLU gate), elementwise over [rows, cols], 16-byte vectors, math in f32."""
    v = _vec(dtype)
    n = rows * cols
    per_block = block * v
    assert n % per_block == 0, f"rows * cols must be a multiple of {per_block}"
    cg, g32 = _to_f32("g32", "g", dtype, v)
    cu, u32 = _to_f32("u32", "u", dtype, v)
    co, o_out = _from_f32("o_out", "o", dtype, v)
    head = _header(
        "k_silu_mul",
        [f"%gate: !kernel.ptr<{dtype}>", f"%up: !kernel.ptr<{dtype}>", f"%out: !kernel.ptr<{dtype}>"],
        f"{n // per_block}",
        f"{block}",
    )
    ir = f"""{head} {{
  %t = kernel.thread_id x
  %blk = kernel.block_id x
  %i = kernel.index %blk * {per_block} + %t * {v}
  %g = kernel.load %gate[%i] : {dtype}[{v}]
  %u = kernel.load %up[%i] : {dtype}[{v}]
{cg}{cu}  %sg = kernel.sigmoid %{g32} : f32[{v}]
  %silu = kernel.mul %{g32}, %sg : f32[{v}]
  %o = kernel.mul %silu, %{u32} : f32[{v}]
{co}  kernel.store %{o_out}, %out[%i]
}}
func.func @forward(%gate: {dtype}[{rows},{cols}], %up: {dtype}[{rows},{cols}]) -> {dtype}[{rows},{cols}] {{
  %out = kernel.alloc : {dtype}[{rows},{cols}]
  kernel.launch @k_silu_mul(%gate, %up, %out)
  func.return %out
}}
"""

    def ref(ins):
        g, u = (x.astype(np.float64) for x in ins)
        return [g / (1.0 + np.exp(-g)) * u]

    def torch_ref(g, u):
        import torch

        return [torch.nn.functional.silu(g) * u]

    return Example(
        f"silu_mul_{dtype}",
        ir,
        lambda rng: [_rand(rng, (rows, cols), dtype), _rand(rng, (rows, cols), dtype)],
        ref,
        _tol(dtype),
        3 * n * ScalarType(dtype).bytes,
        torch_ref,
    )
