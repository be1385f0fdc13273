"""The host side of a kernel-level program: the `func.func` that allocates buffers, binds params, views buffers
and launches the module's kernels in order (the bases are shared with the cuda dialect's host ops)."""

from __future__ import annotations

from typing import ClassVar

from irforge.attributes import SymbolRef
from irforge.ir import Operation
from irforge.types import TensorType

from ..types import PtrType, TensorMapType
from .base import KernelFuncOp, enclosing_kernel
from .memory import AtomicOp, StoreOp
from .tensor_cores import FragStoreOp


class HostOp(Operation):
    """Base of the host-side ops: they live in a `func.func` that allocates buffers and launches kernels."""

    def verify_(self):
        if enclosing_kernel(self) is not None:
            raise self.error("is a host op; it cannot be inside a kernel.func")
        self.verify_op()

    def verify_op(self) -> None:
        pass


# The buffers of a host program, shared with the cuda dialect's host ops: `<op> : type`, `<op> @name : type`,
# `<op> %source : type`.
class AllocBase(Operation):
    operand_names = ()
    result_names = ("result",)
    num_regions = 0

    def verify_op(self):
        if not isinstance(self.result.type, TensorType):
            raise self.error(f"allocates a tensor, not {self.result.type}")

    def print_custom(self, p):
        p.write(self.name)
        p.attr_dict(self.attributes)
        p.write(" : ", p.type(self.result.type))


class ParamBase(Operation):
    operand_names = ()
    result_names = ("result",)
    attribute_types = {"sym": SymbolRef}
    num_regions = 0
    traits = frozenset({"pure"})

    def verify_op(self):
        if not isinstance(self.result.type, TensorType):
            raise self.error(f"binds a tensor, not {self.result.type}")

    def print_custom(self, p):
        p.write(self.name, " ", str(self.attributes["sym"]), " : ", p.type(self.result.type))


class ViewBase(Operation):
    operand_names = ("source",)
    result_names = ("result",)
    num_regions = 0
    traits = frozenset({"pure"})

    def verify_op(self):
        s, r = self.source.type, self.result.type
        if not (isinstance(s, TensorType) and isinstance(r, TensorType)) or s.dtype != r.dtype or s.numel != r.numel:
            raise self.error(f"cannot view {s} as {r}: element type and count must match")

    def print_custom(self, p):
        p.write(self.name, " ", p.value(self.source), " : ", p.type(self.result.type))


class AllocOp(AllocBase, HostOp):
    """A device buffer (an intermediate or an output), allocated once by the runtime."""

    name = "kernel.alloc"


class ParamOp(ParamBase, HostOp):
    """A named parameter (a weight) whose value lives in the program's param store, as `tensor.param` has it."""

    name = "kernel.param"


class ViewOp(ViewBase, HostOp):
    """The same buffer seen with another shape (same element type and element count): costs nothing."""

    name = "kernel.view"


class LaunchBase(Operation):
    """`<op> @callee(%buffers)`: a kernel of the module launched on host buffers, in program order; the callee's
    parameter types (`callee_params`) say what each buffer binds. Shared with the cuda dialect's launch."""

    operand_names = ("*args",)
    result_names = ()
    attribute_types = {"callee": SymbolRef}
    num_regions = 0
    callee_type: ClassVar[type[Operation]]  # the op a callee is

    def callee_op(self) -> Operation | None:
        top = self
        while top.parent_op is not None:
            top = top.parent_op
        name = self.attributes["callee"].name
        for op in top.body.ops if top.regions else ():
            if isinstance(op, self.callee_type) and op.attributes["sym_name"] == name:
                return op
        return None

    def callee_params(self, callee: Operation) -> list:
        """The callee's parameter types."""
        raise NotImplementedError

    def verify_op(self):
        k = self.callee_op()
        if k is None:
            raise self.error(
                f"launches '@{self.attributes['callee'].name}', which is not a {self.callee_type.name} of the module"
            )
        params = self.callee_params(k)
        if len(params) != len(self.args):
            raise self.error(f"passes {len(self.args)} argument(s) to a kernel with {len(params)} parameter(s)")
        for i, (v, t) in enumerate(zip(self.args, params)):
            ok = isinstance(v.type, TensorType) and (
                (isinstance(t, PtrType) and v.type.dtype == t.dtype)
                or (isinstance(t, TensorMapType) and (v.type.dtype, v.type.shape) == (t.dtype, t.shape))
            )
            if not ok:
                raise self.error(f"argument #{i} is {v.type}, which cannot bind parameter type {t}")


class LaunchOp(LaunchBase, HostOp):
    """Launch a kernel of the module on host buffers, in program order (a buffer for each pointer or tensor-map
    parameter)."""

    name = "kernel.launch"
    callee_type = KernelFuncOp

    def callee_params(self, callee: Operation) -> list:
        return callee.attributes["function_type"].inputs

    def verify_op(self):
        super().verify_op()
        written = written_params(self.callee_op())
        for i, v in enumerate(self.args):
            for j in range(i + 1, len(self.args)):
                if self.args[j] is v and (i in written or j in written):
                    raise self.error(f"passes one buffer as arguments #{i} and #{j}, and the kernel writes one of them")

    def print_custom(self, p):
        p.write("kernel.launch ", str(self.attributes["callee"]), "(", p.values(self.args), ")")
        p.attr_dict(self.attributes, elide=("callee",))


def written_params(k: KernelFuncOp) -> set[int]:
    """Indices of the pointer parameters a kernel stores or atomically updates through."""
    args = {a: i for i, a in enumerate(k.body.args)}
    out = set()
    for op in k.walk():
        if isinstance(op, (StoreOp, AtomicOp, FragStoreOp)) and op.mem in args:
            out.add(args[op.mem])
    return out
