from __future__ import annotations

from irforge.dialects import tile as T

from irforge.ir import Block, Operation
from irforge.pass_manager import Pass


class TileSink(Pass):
    """Sink computation past the loops that do not use it.

    The pure ops without regions (loads, scalar math, indices) before a loop whose users all come after it move
    to just after it, in their order: a contraction's epilogue operands (a residual, a bias) are then loaded after the K
    loop, and hold no registers while it runs (D4's down projection with its residual add spilled 288 stores with
    them loaded first). Staged copies and combines across threads stay where they are: their place is a barrier's.
    Chains move together, nothing moves into a region, and no value changes.
    """

    name = "tile-sink"
    input_level = "tile"
    anchor = "kernel"

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp):
            return
        for block in [b for o in op.walk() for r in o.regions for b in r.blocks]:
            _sink(block)


def _sinkable(op: Operation) -> bool:
    return op.has_trait("pure") and not op.regions and op.results != () and not isinstance(op, (T.StageOp, T.CombineOp))


def _sink(block: Block) -> None:
    for loop in [o for o in block.ops if isinstance(o, T.LoopOp)]:
        ops = list(block.ops)
        after = set(ops[ops.index(loop) + 1 :])
        moving: list[Operation] = []
        for op in reversed(ops[: ops.index(loop)]):  # bottom-up: a chain's users are classified first
            if _sinkable(op) and all(u in after or u in moving for u in _users_in(block, op)):
                moving.append(op)
        anchor = loop
        for op in reversed(moving):  # in their order
            op.detach()
            block.insert_after(anchor, op)
            anchor = op


def _users_in(block: Block, op: Operation) -> list[Operation]:
    """The ops of `block` that use one of `op`'s results (themselves or within their regions)."""
    users = []
    for r in op.results:
        for user in r.users:
            while user.parent is not block:
                user = user.parent_op
            users.append(user)
    return users
