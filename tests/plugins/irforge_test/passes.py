"""Passes for testing irforge itself: they change, fail or crash on purpose, or declare levels and options."""

from __future__ import annotations

import math
import re

from irforge.pass_manager import Choices, IntRange, Pass, Pow2, option


class TestFail(Pass):
    """Fail with a located error at the first op carrying the attribute `fail`."""

    name = "test-fail"

    def run(self, op):
        for inner in op.walk():
            if "fail" in inner.attributes:
                raise inner.error("was asked to fail")


class TestCrash(Pass):
    """Raise a Python exception (stands for a bug in a pass)."""

    name = "test-crash"

    def run(self, op):
        raise RuntimeError("deliberate crash")


class TestBreakIR(Pass):
    """Leave invalid IR behind (a test.loop with its bounds swapped) for the verifier to catch."""

    name = "test-break-ir"

    def run(self, op):
        for inner in op.walk():
            if inner.name == "test.loop":
                a = inner.attributes
                a["lower"], a["upper"] = a["upper"] + 1, a["lower"]


class TestLoopUnrollHint(Pass):
    """Record the `factor` option on each test.loop it runs on (a per-anchor pass with a tunable option)."""

    name = "test-loop-hint"
    anchor = "loop"

    factor: int = option(1, help="recorded as the loop's `hint` attribute")

    def run(self, op):
        op.attributes["hint"] = self.factor


class TestMiscompile(Pass):
    """Change the answer on purpose: every float `value` attribute (constants of any level) grows by 1."""

    name = "test-miscompile"

    def run(self, op):
        for inner in op.walk():
            v = inner.attributes.get("value")
            if isinstance(v, float):
                inner.attributes["value"] = v + 1.0


class TestLowerTensorToLoop(Pass):
    """Declare a tensor -> loop lowering and change nothing (exercises the pipeline's level check)."""

    name = "test-tensor-to-loop"
    input_level = "tensor"
    output_level = "loop"

    def run(self, op):
        pass


class TestTensorOnly(Pass):
    """Declare that it reads tensor IR and change nothing (exercises the pipeline's level check)."""

    name = "test-tensor-only"
    input_level = "tensor"

    def run(self, op):
        pass


class TestOptions(Pass):
    """Record every option's value as a `test.options` attribute of the module (one option of each kind)."""

    name = "test-options"

    threads: int = option(128, domain=Pow2(32, 1024), help="a power of two")
    stages: int = option(3, domain=IntRange(1, 7, 2), help="an odd number from 1 to 7")
    scale: float = option(0.5, help="a float")
    fast: bool = option(False, help="a flag")
    mode: str = option("auto", domain=Choices(("auto", "smem", "regs")), help="one of three words")
    label: str = option("", help="any text")
    tiles: tuple[int, ...] = option((16, 16), help="a list of integers")

    def run(self, op):
        op.attributes["test.options"] = self.option_values()


class TestRename(Pass):
    """Set a `tag` attribute on every test.pure op (changes the IR in a predictable way)."""

    name = "test-tag"

    tag: str = option("tagged", help="the value to set")

    def run(self, op):
        for inner in op.walk():
            if inner.name == "test.pure":
                inner.attributes["tag"] = self.tag


_PLANTS = {
    # a sleep the compiler must keep each trip (it deleted a spin on a volatile local: the kernel ran, 4.7 us)
    "hang": "  for (;;) __nanosleep(1000);  // planted by test-plant-failure\n",
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

    def check(self, op) -> str | None:
        return None if self.mode in _PLANTS else f"mode must be hang or fault, got '{self.mode}'"

    def run(self, op):
        from irforge.dialects.cuda.ops import CudaKernelOp

        for k in op.walk():
            if isinstance(k, CudaKernelOp) and math.prod(k.attributes["block"]) >= self.min_threads:
                source = k.attributes["source"]
                body = re.search(r"__global__[^{]*\{\n", source)
                if body is not None:
                    k.attributes["source"] = source[: body.end()] + _PLANTS[self.mode] + source[body.end() :]
                    self.remark(k, f"planted a {self.mode}")
