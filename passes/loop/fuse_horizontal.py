from __future__ import annotations

from irforge.dialects.loop import KernelOp
from irforge.dialects.loop.transforms import cleanup, kernels
from irforge.passes.loop.band import free_band
from irforge.passes.loop.fusion import (
    can_move_up,
    merge_sibling_loops,
    merge_sibling_reductions,
    move_up,
    rename_kernels,
    work,
)
from irforge.passes.loop.tensor_cores import why_lost

from irforge.builtin import FuncOp
from irforge.ir import Operation
from irforge.location import fuse
from irforge.pass_manager import IntRange, Pass, option


class FuseHorizontal(Pass):
    """Merge independent kernels over the same free loops that read the same data into one kernel.

    Two kernels whose outer bands of free loops have the same extents, where the later one reads nothing the
    earlier one or any kernel between them writes, become one kernel running both bodies in one band (the later
    kernel moves up). Their reductions over the same range then share one loop (as in `loop-fuse-siblings`) and
    their common loads are made once: the k and v projections of an attention layer read the normalized input
    once. The merge happens only when it saves work (dynamic ops and memory words), and never when it would put a
    contraction the tensor cores compute in one loop nest with accesses that do not follow its output tile's lanes
    (a rotate-half read, a scatter's computed row): a launch saved is not worth a contraction on the SIMT path.
    """

    name = "loop-fuse-horizontal"
    input_level = "loop"
    max_carriers: int = option(8, domain=IntRange(1, 16), help="most carrier components one reduce loop may hold")

    def run(self, op: Operation) -> None:
        for func in [o for o in op.walk() if isinstance(o, FuncOp)]:
            for k in kernels(func):  # compare canonical loop nests (invariant code hoisted out of the band)
                cleanup(k)
            changed = False
            while _merge_pair(func, self.max_carriers, self.remark):
                changed = True
            if changed:
                rename_kernels(func)


def _merge_pair(func: FuncOp, max_carriers: int, remark) -> bool:
    ks = kernels(func)
    for i, first in enumerate(ks):
        band = [lp.extent for lp in free_band(first)]
        if not band:
            continue
        for second in ks[i + 1 :]:
            if [lp.extent for lp in free_band(second)] != band or not can_move_up(second, first, ks):
                continue
            if not set(map(id, first.loaded_buffers())) & set(map(id, second.loaded_buffers())):
                continue
            merged = _merged(first, second, max_carriers)
            saves = work(merged) < work(first) + work(second)
            lost = why_lost([first, second], [merged]) if saves else None
            if lost:
                remark(second, f"not merged @{second.sym_name} into @{first.sym_name}: {lost}")
            elif saves:
                move_up(second, first)
                func.body.insert_before(first, merged)
                first.erase()
                second.erase()
                return True
            merged.erase()
    return False


def _merged(first: KernelOp, second: KernelOp, max_carriers: int) -> KernelOp:
    """A copy of `first` whose band also runs `second`'s body; `second`'s ops outside its band go before it."""
    merged = first.clone()
    merged.loc = fuse([first.loc, second.loc])
    band, theirs = free_band(merged), free_band(second)
    vm = {lp.iv: new.iv for lp, new in zip(theirs, band)}
    for op in second.body.ops:
        if op is not theirs[0]:
            merged.body.insert_before(band[0], op.clone(vm))
    for op in theirs[-1].body.ops:
        band[-1].body.append(op.clone(vm))
    cleanup(merged)
    merge_sibling_loops(merged)
    cleanup(merged)
    merge_sibling_reductions(merged, max_carriers)
    cleanup(merged)
    return merged
