from __future__ import annotations

from irforge.dialects.loop import BufferOp, ParamOp, StoreOp
from irforge.dialects.loop.transforms import eliminate_dead, is_returned, kernels, reader_kernels

from irforge.builtin import FuncOp
from irforge.ir import Operation
from irforge.pass_manager import Pass


class LoopDeadCode(Pass):
    """Erase what nothing needs: unused computation, dead stores, empty kernels, unused buffers and params.

    Within kernels, pure ops (reductions included) whose results are unused and loops that never run (a size-0
    dimension; a reduction that never runs is its init values); then stores to buffers no kernel reads and the
    function does not return, kernels left without stores, and buffers and params nothing uses.
    """

    name = "loop-dce"
    input_level = "loop"

    def run(self, op: Operation) -> None:
        for func in [o for o in op.walk() if isinstance(o, FuncOp)]:
            for kernel in reversed(kernels(func)):  # later kernels first: their loads keep buffers alive
                for store in [s for s in kernel.walk() if isinstance(s, StoreOp)]:
                    if not reader_kernels(store.buffer) and not is_returned(store.buffer):
                        store.erase()
                eliminate_dead(kernel)
                if not any(isinstance(s, StoreOp) for s in kernel.walk()):
                    kernel.erase()
            for o in list(func.body.ops):
                if isinstance(o, (BufferOp, ParamOp)) and not o.result.uses:
                    o.erase()
