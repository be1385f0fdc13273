"""The kernel dialect: hardware primitives of a GPU kernel, as a structured SIMT IR.

A module at this level holds `kernel.func` ops (one per GPU kernel: typed pointer parameters, a launch shape, a body
that every thread runs) and a host `func.func` that allocates buffers and launches them in order:

kernel.func @k_add(%a: !kernel.ptr<f32>, %b: !kernel.ptr<f32>, %c: !kernel.ptr<f32>) grid(4) block(256) {
  %t = kernel.thread_id x
  %blk = kernel.block_id x
  %x = kernel.load %a[%blk * 1024 + %t * 4] : f32[4]
  ...
}
func.func @forward(%a: f32[4096], %b: f32[4096]) -> f32[4096] {
  %c = kernel.alloc : f32[4096]
  kernel.launch @k_add(%a, %b, %c)
  func.return %c
}

docs/dialects/kernel.md documents every op. The reference interpreter is a SIMT simulator (`simulator.run`).
"""

from __future__ import annotations

from irforge.dialect import Dialect, grammar_file
from irforge.scalar_ops import SCALAR_OPS

from .cluster import OPS as CLUSTER_OPS
from .dependent_launch import OPS as DEPENDENT_LAUNCH_OPS
from .ops import OPS
from .syntax import KernelSyntax
from .types import TYPES
from .warpgroup import OPS as WARPGROUP_OPS


def _grammar() -> str:
    # Longest names first, so the regex alternation never stops at a prefix (floor before floordiv).
    names = "|".join(sorted(SCALAR_OPS, key=lambda n: (-len(n), n)))
    return grammar_file(__name__, "kernel.lark").replace("__SCALAR_OPS__", names)


dialect = Dialect(
    name="kernel",
    summary="hardware primitives: threads, shared memory, barriers, shuffles, async copies, TMA, mma, wgmma,"
    " dependent launches, clusters",
    ops=OPS + WARPGROUP_OPS + DEPENDENT_LAUNCH_OPS + CLUSTER_OPS,
    types=TYPES,
    level="kernel",
    grammar=_grammar(),
    syntax=KernelSyntax,
    interpreter="irforge.dialects.kernel.simulator:run",
)
