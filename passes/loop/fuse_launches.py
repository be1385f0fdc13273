from __future__ import annotations

from irforge.dialects.loop import ForOp, KernelOp, ReduceOp
from irforge.dialects.loop.transforms import kernels
from irforge.passes.loop.fusion import can_move_up, move_up, rename_kernels
from irforge.passes.loop.tensor_cores import products

from irforge.builtin import FuncOp
from irforge.ir import Operation
from irforge.location import fuse
from irforge.pass_manager import Pass


class FuseLaunches(Pass):
    """Put independent kernels that read the same data into one launch, their loop nests side by side.

    Two kernels where the later one reads nothing the earlier one or any kernel between them writes, and that read
    some buffer in common, become one kernel holding both kernels' loops (the later kernel moves up). Unlike
    `loop-fuse-horizontal`, the loops need not have the same extents and nothing is shared at this level: the
    tile level gives each nest its own band over the same blocks (the grid as large as the larger asks), and
    stages what both read once per block. What it saves is a launch and the wait at its boundary, which a decode
    step's short kernels pay one after another: the q and k projections of one normalized row become one launch,
    and so do the rotary embeddings of q and k (with the v projection beside them), which read the same rows of
    cos and sin. A kernel keeps its own launch when the tensor cores compute one of its contractions (its tiles
    take the whole block) or when it runs a reduction outside its loops (each block of the launch would run it).
    """

    name = "loop-fuse-launches"
    input_level = "loop"

    def run(self, op: Operation) -> None:
        for func in [o for o in op.walk() if isinstance(o, FuncOp)]:
            changed = False
            while _merge_pair(func, self.remark):
                changed = True
            if changed:
                rename_kernels(func)


def why_alone(kernel: KernelOp) -> str | None:
    """Why `kernel` keeps its own launch (None: it can share one)."""
    tops = kernel.body.ops
    if not any(isinstance(o, ForOp) for o in tops):
        return "it has no free loop to give a band"
    if any(isinstance(o, ReduceOp) for o in tops):
        return "a reduction outside its loops would run in every block of the shared launch"
    if any(p.why_not is None for p in products(kernel)):
        return "the tensor cores compute its contraction"
    return None


def _merge_pair(func: FuncOp, remark) -> bool:
    ks = kernels(func)
    alone = {id(k): why_alone(k) for k in ks}
    for i, first in enumerate(ks):
        if alone[id(first)]:
            continue
        for second in ks[i + 1 :]:
            if alone[id(second)] or not can_move_up(second, first, ks):
                continue
            if not set(map(id, first.loaded_buffers())) & set(map(id, second.loaded_buffers())):
                continue
            remark(second, f"@{second.sym_name} launched with @{first.sym_name}, its loops beside the other's")
            move_up(second, first)
            vm: dict = {}
            for o in second.body.ops:
                first.body.append(o.clone(vm))
            first.loc = fuse([first.loc, second.loc])
            second.erase()
            return True
    return False
