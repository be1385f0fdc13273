from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where it computes: the pass registry imports every pass at startup
    import numpy as np

from irforge.dialects.tensor import ConstantOp

from irforge.pass_manager import Pass
from irforge.rewrite import RewritePattern, apply_patterns
from irforge.scalar_ops import MONOIDS, evaluate, quantize


def _const(v):
    """The value of a splat constant (as its element type holds it), or None for anything else."""
    import numpy as np

    op = getattr(v, "op", None)
    if not isinstance(op, ConstantOp):
        return None
    return _py(quantize(np.array(op.attributes["value"]), v.type.dtype), v.type.dtype)


def _py(a: np.ndarray, dtype):
    import numpy as np

    x = np.asarray(a).reshape(-1)[0]
    if dtype.name == "bool":
        return bool(x)
    return int(x) if dtype.is_int else float(x)


def _splat(op, value):
    return ConstantOp([], [op.result.type], {"value": value}, loc=op.loc)


class _Elementwise(RewritePattern):
    """Constant operands fold; x*1, 1*x, x/1, x+0, 0+x, x-0, select(const, a, b), select(c, a, a) simplify."""

    op_name = "tensor.elementwise"

    def match_and_rewrite(self, op, rw):
        import numpy as np

        name = op.attributes["op"]
        vals = [_const(v) for v in op.operands]
        t = op.result.type
        if all(v is not None for v in vals):
            args = [np.array(v, dtype=np.float64 if isinstance(v, float) else None) for v in vals]
            rw.replace_op(op, _splat(op, _py(evaluate(name, args, t.dtype), t.dtype)))
            return True
        same = lambda i: op.operands[i].type == t
        keep = None
        if name == "mul" and vals[1] == 1 and same(0):
            keep = 0
        elif name == "mul" and vals[0] == 1 and same(1):
            keep = 1
        elif name == "sub" and vals[1] == 0 and same(0):
            keep = 0
        elif name == "div" and vals[1] == 1 and same(0):
            keep = 0
        elif name == "add" and vals[1] == 0 and same(0):
            keep = 0
        elif name == "add" and vals[0] == 0 and same(1):
            keep = 1
        elif name == "select" and vals[0] is not None:
            keep = 1 if vals[0] else 2
        elif name == "select" and op.operands[1] is op.operands[2]:
            keep = 1
        elif name == "cast" and op.operands[0].type == t:
            keep = 0
        if keep is None:
            return False
        rw.replace_op(op, [op.operands[keep]])
        return True


class _Movement(RewritePattern):
    """index_map and gather of a splat are the splat in the new shape."""

    def match_and_rewrite(self, op, rw):
        if op.name not in ("tensor.index_map", "tensor.gather"):
            return False
        v = _const(op.operands[0])
        if v is None:
            return False
        rw.replace_op(op, _splat(op, v))
        return True


class _Reduce(RewritePattern):
    """max/min of a splat is the splat; add is n * value; mul is value ** n (n = elements per result)."""

    op_name = "tensor.reduce"

    def match_and_rewrite(self, op, rw):
        import numpy as np

        v = _const(op.input)
        if v is None:
            return False
        kind = op.attributes["kind"]
        n = 1
        for a in op.attributes["axes"]:
            n *= op.input.type.shape[a]
        t = op.result.type
        if n == 0:
            value = MONOIDS[kind].identity(t.dtype)
        elif kind in ("max", "min"):
            value = v
        else:
            scalar = "mul" if kind == "add" else "pow"
            if scalar == "pow" and not t.dtype.is_float:
                return False
            args = [np.array(v, dtype=np.float64 if isinstance(v, float) else None), np.array(n)]
            value = _py(evaluate(scalar, args, t.dtype), t.dtype)
        rw.replace_op(op, _splat(op, value))
        return True


class FoldConstants(Pass):
    """Fold splat constants through elementwise ops, index maps, gathers and reductions; drop identities.

    The identities: x * 1, x + 0, x - 0, x / 1, same-type casts, and selects with a known condition.
    """

    name = "tensor-fold-constants"
    input_level = "tensor"

    def run(self, op):
        apply_patterns(op, [_Elementwise(), _Movement(), _Reduce()])
