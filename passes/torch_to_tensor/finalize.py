from __future__ import annotations

from irforge.diagnostics import error
from irforge.pass_manager import Pass


class TorchToTensorFinalize(Pass):
    """The end of torch-to-tensor: refuse any torch op no decomposition lowered, naming it at the user's line."""

    name = "torch-to-tensor-finalize"
    input_level = "torch"
    output_level = "tensor"

    def run(self, op):
        for inner in op.walk():
            if inner.dialect == "torch":
                what = inner.name.removeprefix("torch.")
                raise error(f"unsupported torch op '{what}': no decomposition to the tensor dialect", inner.loc)
