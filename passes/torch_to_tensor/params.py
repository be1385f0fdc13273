from __future__ import annotations

from irforge.dialects.tensor import ParamOp as TensorParam

from irforge.pass_manager import Pass
from irforge.rewrite import RewritePattern, apply_patterns


class _Param(RewritePattern):
    op_name = "torch.param"

    def match_and_rewrite(self, op, rw):
        rw.replace_op(op, TensorParam([], [op.result.type], dict(op.attributes), loc=op.loc))
        return True


class DecomposeParams(Pass):
    """torch.param @name -> tensor.param @name (the param store is unchanged)."""

    name = "decompose-params"
    input_level = "torch"
    output_level = "torch"

    def run(self, op):
        apply_patterns(op, [_Param()], fold_dead=False)
