"""The `Example` every builder returns, and what the builders share: random inputs, tolerances, 16-byte vector
widths, casts to and from f32 in IR, kernel headers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from irforge.scalar_ops import quantize
from irforge.types import ScalarType


@dataclass
class Example:
    name: str
    ir: str
    make_inputs: Callable  # rng -> list of numpy arrays (bf16 values held in float32)
    reference: Callable  # inputs -> list of float64 arrays
    rtol: float  # tolerance on ||out - ref|| / ||ref||
    bytes_moved: int  # each input read once, each output written once
    torch_reference: Callable | None = None  # torch tensors -> torch tensors, for GPU comparisons and benchmarks


def _rand(rng, shape, dtype: str, scale: float = 1.0) -> np.ndarray:
    return quantize((rng.standard_normal(shape) * scale).astype(np.float32), ScalarType(dtype))


def _tol(dtype: str) -> float:
    return 1e-5 if dtype == "f32" else 1e-2


def _vec(dtype: str) -> int:
    """Elements in a 16-byte vector access."""
    return 16 // ScalarType(dtype).bytes


def _to_f32(name: str, v: str, dtype: str, n: int) -> tuple[str, str]:
    """IR casting tile `v` of `n` `dtype` elements to f32 (nothing for f32): (lines, name of the f32 tile)."""
    if dtype == "f32":
        return "", v
    return f"  %{name} = kernel.cast %{v} : {dtype}[{n}] to f32[{n}]\n", name


def _from_f32(name: str, v: str, dtype: str, n: int) -> tuple[str, str]:
    if dtype == "f32":
        return "", v
    return f"  %{name} = kernel.cast %{v} : f32[{n}] to {dtype}[{n}]\n", name


def _header(name: str, params: list[str], grid: str, block: str) -> str:
    return f"kernel.func @{name}({', '.join(params)}) grid({grid}) block({block})"
