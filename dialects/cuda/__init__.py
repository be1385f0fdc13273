"""The cuda dialect: per kernel, the emitted CUDA C++ with its launch configuration and argument order; per model,
the host program (buffers allocated once, launches in order). It has no CPU interpreter: its semantics are the
CUDA source, which CI compiles with NVRTC, and the GPU runs (`irforge.runtime.Executor`)."""

from __future__ import annotations

from irforge.dialect import Dialect, grammar_file

from .ops import OPS
from .syntax import CudaSyntax

dialect = Dialect(
    name="cuda",
    summary="emitted CUDA C++ per kernel, launch configuration, and the host program",
    ops=OPS,
    level="cuda",
    grammar=grammar_file(__name__, "cuda.lark"),
    syntax=CudaSyntax,
)
