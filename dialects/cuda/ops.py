"""The cuda dialect's operations: emitted CUDA C++ per kernel, and the host program that runs them.

cuda.kernel @k_add(!kernel.ptr<f32>, !kernel.ptr<f32>) grid(4) block(256) smem(0) {{{
extern "C" __global__ void k_add(...) { ... }
}}}
cuda.program @forward {
  %a = cuda.input 0 : f32[1024]
  %w = cuda.param @weight : f32[1024]
  %c = cuda.alloc : f32[1024]
  cuda.launch @k_add(%a, %w, %c)
  cuda.output %c
}

A program's buffers are its inputs (bound per call, by position), its parameters (model weights, by name: bound
once), its state (by name: memory the runtime keeps across calls, which kernels update in place), and the
allocations (intermediates and outputs), which the runtime makes once and reuses for every call.
"""

from __future__ import annotations

from irforge.attributes import SymbolRef
from irforge.ir import Operation
from irforge.types import TensorType

from ..kernel.ops import AllocBase, LaunchBase, ParamBase, ViewBase
from ..kernel.types import PtrType, TensorMapType
from ..launch import dims_text

_SOURCE_CLOSE = "}}}"


def source_block_ok(source: str) -> bool:
    """Whether `source` prints as a raw `{{{ ... }}}` block that parses back to itself."""
    if source == "":
        return True
    return source.endswith("\n") and not any(line.startswith(_SOURCE_CLOSE) for line in source.split("\n"))


class CudaKernelOp(Operation):
    """One kernel's CUDA C++ translation unit, its entry point (the symbol), parameter types in argument order and
    launch configuration (grid, block, dynamic shared-memory bytes). `dependent_launch`: launched as a programmatic
    dependent of the launch before it (the source waits for it with `griddepcontrol.wait`)."""

    name = "cuda.kernel"
    operand_names = ()
    result_names = ()
    attribute_types = {"sym_name": str, "params": tuple, "grid": tuple, "block": tuple, "smem": int, "source": str}
    optional_attributes = {"dependent_launch": bool}
    num_regions = 0
    traits = frozenset({"symbol"})

    def verify_(self):
        for t in self.attributes["params"]:
            if not isinstance(t, (PtrType, TensorMapType)):
                raise self.error(f"parameters are !kernel.ptr or !kernel.tensormap, got {t}")
        for what in ("grid", "block"):
            dims = self.attributes[what]
            if len(dims) != 3 or any(not isinstance(d, int) or isinstance(d, bool) or d <= 0 for d in dims):
                raise self.error(f"'{what}' must be 1 to 3 positive integers, got {list(dims)}")
        if self.attributes["smem"] < 0:
            raise self.error("'smem' must be non-negative")

    def print_custom(self, p):
        a = self.attributes
        src = a["source"]
        p.write("cuda.kernel ", str(SymbolRef(a["sym_name"])), "(", p.types(a["params"]), ")")
        p.write(" grid(", dims_text(a["grid"]), ") block(", dims_text(a["block"]), f") smem({a['smem']})")
        elide = ("sym_name", "params", "grid", "block", "smem", "source")
        if source_block_ok(src):
            p.attr_dict(a, elide=elide, prefix=" attributes ")
            p.write(" {{{\n", src, _SOURCE_CLOSE)
        else:  # a source line starting with the closing braces: keep the source as an escaped string attribute
            p.attr_dict(a, elide=elide[:-1], prefix=" attributes ")
            p.write(" {{{\n}}}")


class ProgramOp(Operation):
    """The host program: its buffers and the kernels' launch order, ending with `cuda.output`."""

    name = "cuda.program"
    operand_names = ()
    result_names = ()
    attribute_types = {"sym_name": str}
    num_regions = 1
    traits = frozenset({"isolated", "symbol", "single_block"})

    def verify_(self):
        ops = self.body.ops
        if not ops or not isinstance(ops[-1], OutputOp):
            raise self.error("must end with cuda.output")
        seen = {}
        for op in ops:
            if isinstance(op, InputOp):
                pos = op.attributes["position"]
                if pos in seen:
                    raise op.error(f"input position {pos} is bound twice")
                seen[pos] = op
        if sorted(seen) != list(range(len(seen))):
            raise self.error(f"input positions must be 0..{len(seen) - 1}, got {sorted(seen)}")

    def print_custom(self, p):
        p.write("cuda.program ", str(SymbolRef(self.attributes["sym_name"])))
        p.attr_dict(self.attributes, elide=("sym_name",), prefix=" attributes ")
        p.write(" ")
        p.region(self.regions[0])


class _HostOp(Operation):
    def verify_(self):
        if not isinstance(self.parent_op, ProgramOp):
            raise self.error("must be inside a cuda.program")
        self.verify_op()

    def verify_op(self):
        pass


class InputOp(_HostOp):
    """An input of the program: argument `position` of every call, used in place (copied in for graph replay)."""

    name = "cuda.input"
    operand_names = ()
    result_names = ("result",)
    attribute_types = {"position": int}
    num_regions = 0

    def verify_op(self):
        if not isinstance(self.result.type, TensorType):
            raise self.error(f"binds a tensor, not {self.result.type}")

    def print_custom(self, p):
        p.write(f"cuda.input {self.attributes['position']} : ", p.type(self.result.type))


class ParamOp(ParamBase, _HostOp):
    """A parameter (a model weight) from the param store, by name: bound once, kept on the device."""

    name = "cuda.param"


class StateOp(ParamBase, _HostOp):
    """State, by name: memory the runtime keeps across calls (and shares between the programs that name it),
    read and updated in place by the kernels (a KV cache)."""

    name = "cuda.state"


class AllocOp(AllocBase, _HostOp):
    """A device buffer allocated once and reused by every call (an intermediate or an output)."""

    name = "cuda.alloc"


class ViewOp(ViewBase, _HostOp):
    """The same buffer with another shape (same element type and count)."""

    name = "cuda.view"


class LaunchOp(LaunchBase, _HostOp):
    """Launch a cuda.kernel of the module on buffers, in program order."""

    name = "cuda.launch"
    callee_type = CudaKernelOp

    def callee_params(self, callee: Operation) -> list:
        return callee.attributes["params"]

    def print_custom(self, p):
        p.write("cuda.launch ", str(self.attributes["callee"]), "(", p.values(self.args), ")")


class OutputOp(_HostOp):
    """The program's results, in order."""

    name = "cuda.output"
    operand_names = ("*values",)
    result_names = ()
    num_regions = 0
    traits = frozenset({"terminator"})

    def print_custom(self, p):
        p.write("cuda.output")
        if self.operands:
            p.write(" ", p.values(self.operands))


OPS = (CudaKernelOp, ProgramOp, InputOp, ParamOp, StateOp, AllocOp, ViewOp, LaunchOp, OutputOp)
