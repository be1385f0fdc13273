from __future__ import annotations

from irforge.pass_manager import Choices, IntRange, Pass, Pow2, option


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
