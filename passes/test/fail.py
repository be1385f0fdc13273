from __future__ import annotations

from irforge.pass_manager import Pass, option


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
