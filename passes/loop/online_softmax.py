from __future__ import annotations

from irforge.dialects.loop import ReduceOp
from irforge.dialects.loop.build import Builder
from irforge.dialects.loop.transforms import region_key
from irforge.dialects.scalar import ScalarMathOp

from irforge.attributes import attr_key
from irforge.ir import Operation, OpResult
from irforge.location import fuse
from irforge.pass_manager import Pass


class OnlineSoftmax(Pass):
    """Rewrite softmax's max pass and exp-sum pass into one online reduction: (running max, rescaled sum).

    Recognizes, in one block, `m = reduce max(x_j)` followed by `s = reduce add(exp(x_j - m))` over the same range,
    where both loops compute `x_j` the same way and the sum uses `m` only there. Both become
    `m, s = reduce online(-inf, 0.0) { ...x_j...; yield x_j, 1.0 }`: the online carrier keeps the running max and
    the sum rescaled to it (`scalar_ops.MONOIDS["online"]`), so the row is read once instead of twice; whatever
    used `m` and `s` (softmax's division, log-softmax's log) is unchanged. Flash attention is the same algebra
    with more sums.
    """

    name = "loop-online-softmax"
    input_level = "loop"
    anchor = "kernel"

    def run(self, op: Operation) -> None:
        while _rewrite_one(op):
            pass


def _rewrite_one(kernel: Operation) -> bool:
    for block in [b for o in kernel.walk() for r in o.regions for b in r.blocks]:
        reds = [o for o in block.ops if isinstance(o, ReduceOp) and len(o.results) == 1]
        for mx in [r for r in reds if r.attributes["monoids"] == ("max",)]:
            for sm in [r for r in reds if r.attributes["monoids"] == ("add",)]:
                if block.ops.index(sm) > block.ops.index(mx) and _is_exp_sum_of(sm, mx):
                    _rewrite(mx, sm)
                    return True
    return False


def _is_exp_sum_of(sm: ReduceOp, mx: ReduceOp) -> bool:
    """Whether `sm` sums exp(x - m) for the x `mx` maximizes (m = mx's result), using m nowhere else."""
    if sm.extent != mx.extent or mx.init != ((float("-inf"),),) or sm.init != ((0.0,),):
        return False
    if mx.result.type != sm.result.type or not mx.result.type.is_float:
        return False
    e = sm.yielded[0]
    if not (isinstance(e, OpResult) and isinstance(e.op, ScalarMathOp) and e.op.fn == "exp"):
        return False
    d = e.op.operand
    if not (isinstance(d, OpResult) and isinstance(d.op, ScalarMathOp) and d.op.fn == "sub"):
        return False
    x, m = d.op.operands
    if m is not mx.result or len(mx.result.uses) < 1:
        return False
    uses_in_sum = [u for u, _ in mx.result.uses if sm.is_ancestor_of(u)]
    if uses_in_sum != [d.op]:
        return False
    return computation(x, sm) == computation(mx.yielded[0], mx)


def computation(v, red: ReduceOp):
    """How `v` is computed inside `red`'s body, up to names, with the loop index as a marker."""
    if v is red.iv:
        return ("index",)
    if not (isinstance(v, OpResult) and red.is_ancestor_of(v.op)):
        return ("outside", id(v))
    op = v.op
    operands = tuple(computation(u, red) for u in op.operands)
    body = region_key(op, {red.iv: "index"}) if op.regions else ()
    attrs = tuple(sorted((k, attr_key(a)) for k, a in op.attributes.items()))
    return (op.name, attrs, str(v.type), v.index, operands, body)


def _rewrite(mx: ReduceOp, sm: ReduceOp) -> None:
    t = mx.result.type
    b = Builder.before_op(mx, fuse([mx.loc, sm.loc]))
    hints = [mx.result.name_hint, sm.result.name_hint]
    online, iv, body = b.reduce(mx.extent, [("online", (float("-inf"), 0.0))], [t, t], mx.iv.name_hint, hints)
    vm = {mx.iv: iv}
    for op in mx.body.ops[:-1]:
        body.insert(op.clone(vm))
    x = vm.get(mx.yielded[0], mx.yielded[0])
    body.yield_(x, body.const(1.0, t))
    mx.result.replace_all_uses_with(online.results[0])
    sm.result.replace_all_uses_with(online.results[1])
    sm.erase()
    mx.erase()
