"""A benchmark case: a PyTorch computation, its inputs (shapes, dtypes, how they are filled), what it moves and what
it computes. Suites are lists of cases (`seed84.py`, `llm.py`); `suite(name)` returns one.

Inputs and weights are made from a seed derived from the case id, so every process (the compile-only run on a
CPU machine, the timed run on the GPU) makes the same ones without storing them. Effective bytes are computed, not
typed: each input read once, each weight read once, each output written once, the outputs' shapes found by running
the computation on meta tensors.
"""

from __future__ import annotations

import fnmatch
import importlib
import importlib.util
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import torch

from irforge.diagnostics import error

from . import SUITES

DTYPE_NAMES = {torch.float64: "f64", torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}
HALF_TOLERANCE, FULL_TOLERANCE = 2e-2, 1e-4


@dataclass(frozen=True)
class Input:
    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    fill: Callable | None = None  # (generator, device) -> tensor; None: standard normal

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def text(self) -> str:
        return f"{self.name}[{','.join(map(str, self.shape))}]"


class _Function(torch.nn.Module):
    """A case's function as the module the frontend captures and torch.compile compiles."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


@dataclass
class Case:
    id: str
    family: str
    inputs: tuple[Input, ...]
    flops: int
    fn: Callable | None = None  # the computation on the inputs; None when `module` computes it
    module: Callable | None = None  # () -> nn.Module: the computation with its weights, made after seeding
    model: str = ""  # the model the shapes come from (TL, QW), if any
    requires: str | None = None  # an optional package the case needs
    tolerance: float | None = None  # ||out - eager|| / ||eager||; None: by dtype (f32 1e-4, halves 2e-2)
    note: str = ""

    @property
    def seed(self) -> int:
        return zlib.crc32(self.id.encode())

    @property
    def dtype(self) -> torch.dtype:
        """The case's floating-point type: its first floating input's."""
        return next((i.dtype for i in self.inputs if i.dtype.is_floating_point), torch.float32)

    @property
    def tol(self) -> float:
        if self.tolerance is not None:
            return self.tolerance
        return HALF_TOLERANCE if self.dtype.itemsize == 2 else FULL_TOLERANCE

    def missing(self) -> str | None:
        """Why the case cannot run here (an optional package is not installed), or None."""
        if self.requires and importlib.util.find_spec(self.requires) is None:
            return f"skipped: needs {self.requires}"
        return None

    def shapes(self) -> str:
        return " ".join(i.text() for i in self.inputs) + f" {DTYPE_NAMES[self.dtype]}"

    def program(self, device, init: bool = True) -> torch.nn.Module:
        """The computation as a module on `device`; with `init=False` its weights are left uninitialised (enough
        to compile it, and quick)."""
        if self.module is None:
            return _Function(self.fn)
        torch.manual_seed(self.seed)
        with torch.device(device if init else "meta"):
            m = self.module()
        return (m.to(device) if init else m.to_empty(device=device)).eval()

    def make_inputs(self, device) -> tuple:
        gen = torch.Generator(device=device).manual_seed(self.seed)
        return tuple(
            i.fill(gen, device)
            if i.fill is not None
            else torch.randn(i.shape, generator=gen, device=device, dtype=i.dtype)
            for i in self.inputs
        )

    def empty_inputs(self, device) -> tuple:
        return tuple(torch.empty(i.shape, dtype=i.dtype, device=device) for i in self.inputs)

    @cached_property
    def bytes(self) -> int | None:
        """Effective bytes (None while a needed package is missing)."""
        if self.missing():
            return None
        program = self.program("meta")
        weights = sum(t.numel() * t.element_size() for t in [*program.parameters(), *program.buffers()])
        with torch.no_grad():
            out = program(*self.empty_inputs("meta"))
        outs = out if isinstance(out, (tuple, list)) else (out,)
        return sum(i.nbytes for i in self.inputs) + weights + sum(o.numel() * o.element_size() for o in outs)


def suite(name: str) -> list[Case]:
    if name not in SUITES:
        raise error(f"unknown suite '{name}' (suites: {', '.join(SUITES)})")
    return importlib.import_module(SUITES[name]).cases()


def select(cases: list[Case], patterns: str | None) -> list[Case]:
    """The cases matching the comma-separated globs (all when None), in suite order; a glob after `!` removes
    what it matches (`'*,!L9'`: all but L9)."""
    if not patterns:
        return cases
    globs = [p.strip() for p in patterns.split(",") if p.strip()]
    take = [g for g in globs if not g.startswith("!")] or ["*"]
    drop = [g[1:] for g in globs if g.startswith("!")]
    unmatched = [g for g in take + drop if not any(fnmatch.fnmatchcase(c.id, g) for c in cases)]
    if unmatched:
        raise error(f"no case matches '{unmatched[0]}' (see the ids with --list)")

    def matches(c: Case, gs: list[str]) -> bool:
        return any(fnmatch.fnmatchcase(c.id, g) for g in gs)

    return [c for c in cases if matches(c, take) and not matches(c, drop)]
