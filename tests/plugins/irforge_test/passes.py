"""Passes for testing irforge itself: they change, fail or crash on purpose, or declare levels and options."""

from __future__ import annotations

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
