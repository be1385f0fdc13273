from __future__ import annotations

from irforge.dialects.loop import ReduceOp
from irforge.dialects.loop.build import Builder
from irforge.dialects.loop.transforms import captured_values, defining_op, eliminate_common

from irforge.ir import Operation
from irforge.location import fuse
from irforge.pass_manager import IntRange, Pass, option


class FuseSiblings(Pass):
    """Merge independent reductions over the same range into one loop with several carriers.

    Two `loop.reduce`s of one block with the same extent, neither using the other's results, become one loop
    carrying both monoids (the gate and up projections of a SwiGLU MLP share one pass over the input row); the
    loads they share are then made once. The merged loop sits where the first was, so the second may only use
    values defined before it. `max-carriers` bounds the values one loop carries (registers on a GPU).
    """

    name = "loop-fuse-siblings"
    input_level = "loop"
    anchor = "kernel"
    max_carriers: int = option(8, domain=IntRange(1, 16), help="most carrier components one reduce loop may hold")

    def run(self, op: Operation) -> None:
        while _merge_one(op, self.max_carriers):
            pass


def _merge_one(kernel: Operation, max_carriers: int) -> bool:
    for block in [b for o in kernel.walk() for r in o.regions for b in r.blocks]:
        reds = [o for o in block.ops if isinstance(o, ReduceOp)]
        for i, first in enumerate(reds):
            for second in reds[i + 1 :]:
                if _can_merge(first, second, max_carriers):
                    _merge(first, second)
                    return True
    return False


def _can_merge(first: ReduceOp, second: ReduceOp, max_carriers: int) -> bool:
    if first.extent != second.extent or len(first.results) + len(second.results) > max_carriers:
        return False
    block = first.parent
    at = block.ops.index(first)
    for v in captured_values(second):
        owner = defining_op(v)
        # what the second loop reads must exist where the first one is (and must not be the first's results)
        for anc in _ancestors_or_self(owner):
            if anc.parent is block:
                if block.ops.index(anc) >= at:
                    return False
                break
    return True


def _ancestors_or_self(op):
    while op is not None:
        yield op
        op = op.parent_op


def _merge(first: ReduceOp, second: ReduceOp) -> None:
    carriers = [(m.name, init) for m, init, _ in first.carriers + second.carriers]
    types = [r.type for r in (*first.results, *second.results)]
    hints = [r.name_hint for r in (*first.results, *second.results)]
    b = Builder.before_op(first, fuse([first.loc, second.loc]))
    merged, iv, body = b.reduce(first.extent, carriers, types, first.iv.name_hint, hints)
    yielded = []
    for red in (first, second):
        vm = {red.iv: iv}
        for op in red.body.ops[:-1]:
            body.insert(op.clone(vm))
        yielded += [vm.get(v, v) for v in red.yielded]
    body.yield_(*yielded)
    for old, new in zip((*first.results, *second.results), merged.results):
        old.replace_all_uses_with(new)
    first.erase()
    second.erase()
    eliminate_common(merged)
