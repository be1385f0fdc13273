"""CUDA launch shapes, as the tile, kernel and cuda dialects spell them: grid and block sizes along (x, y, z)."""

from __future__ import annotations


def launch_dims(dims) -> tuple[int, ...]:
    """Grid or block sizes (one number, or up to three) padded to (x, y, z)."""
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    return (*dims, *(1,) * (3 - len(dims))) if len(dims) <= 3 else dims


def dims_text(dims) -> str:
    """Sizes as printed: trailing 1s dropped (`grid(32)` for (32, 1, 1))."""
    d = list(dims)
    while len(d) > 1 and d[-1] == 1:
        d.pop()
    return ", ".join(map(str, d))
