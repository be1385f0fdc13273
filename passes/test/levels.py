from __future__ import annotations

from irforge.pass_manager import Pass


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
