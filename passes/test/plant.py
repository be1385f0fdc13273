from __future__ import annotations

import math
import re

from irforge.ir import Operation
from irforge.pass_manager import Pass, option

_PLANTS = {
    "hang": "  { volatile int irf_spin = 1; while (irf_spin) {} }  // planted by test-plant-failure\n",
    "fault": "  *(volatile int*)0 = 1;  // planted by test-plant-failure: an illegal address\n",
}


class TestPlantFailure(Pass):
    """Make CUDA kernels hang or fault on purpose (exercises the recovery of `irforge tune` and `irforge bench`).

    Every `cuda.kernel` launched with at least `min-threads` threads per block gets, first thing in its body, an
    endless loop (`mode=hang`) or a store to address 0 (`mode=fault`: an illegal address, which leaves the CUDA
    context unusable). With the default `min-threads`, a kernel of one thread per block (the tuner's reference
    schedule) is left alone: only scheduled kernels fail.
    """

    name = "test-plant-failure"
    input_level = "cuda"
    mode: str = option("hang", help="hang (an endless loop) or fault (a store to address 0)")
    min_threads: int = option(2, help="plant only into kernels with at least this many threads per block")

    def check(self, op: Operation) -> str | None:
        return None if self.mode in _PLANTS else f"mode must be hang or fault, got '{self.mode}'"

    def run(self, op: Operation) -> None:
        from irforge.dialects.cuda.ops import CudaKernelOp

        for k in op.walk():
            if isinstance(k, CudaKernelOp) and math.prod(k.attributes["block"]) >= self.min_threads:
                source = k.attributes["source"]
                body = re.search(r"__global__[^{]*\{\n", source)
                if body is not None:
                    k.attributes["source"] = source[: body.end()] + _PLANTS[self.mode] + source[body.end() :]
                    self.remark(k, f"planted a {self.mode}")
