"""loop-online-attention: attention found by algebra becomes one kernel carrying (m, l, O), with the answer kept
(random shapes, masks, scales, GQA groups and written forms against the loop interpreter before the pass)."""

from __future__ import annotations

import loopgen
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from irforge.dialects.loop import KernelOp, ReduceOp
from irforge.passes.torch_to_tensor.common import matmul, softmax

from irforge.interpreter import interpret
from irforge.pass_manager import run_pipeline
from irforge.testing import check_pipeline
from irforge.types import boolean, f32, tensor

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# tensor-to-loop up to the pass (pipelines/tensor-to-loop.pipeline)
BEFORE = (
    "lift-to-loop,loop-fuse-elementwise,loop-fuse-broadcast,loop-fuse-reductions,loop-fuse-horizontal,"
    "loop-fuse-reductions,loop-fuse-siblings,loop-online-softmax"
)


@st.composite
def attention_programs(draw):
    """softmax(q kᵀ · scale [+ mask]) @ v over random shapes: SDPA's safe softmax or the plain written-out one, no
    mask, causal, a boolean keep-mask or an additive one, key/value heads shared by groups of query heads."""
    return loopgen.attention_module(
        batch=draw(st.integers(1, 2)),
        kv_heads=draw(st.integers(1, 2)),
        group=draw(st.integers(1, 2)),
        queries=draw(st.integers(1, 5)),
        keys=draw(st.integers(1, 6)),
        e=draw(st.integers(1, 4)),
        ev=draw(st.integers(1, 3)),
        mask=draw(st.sampled_from(["none", "causal", "bool", "add"])),
        safe=draw(st.booleans()),
        scale=draw(st.sampled_from([1.0, 0.5, -2.0])),
    )


def _kernels(module) -> list[KernelOp]:
    return [op for op in module.walk() if isinstance(op, KernelOp)]


@SETTINGS
@given(attention_programs())
def test_attention_becomes_one_kernel_with_the_same_answer(module):
    run_pipeline(module, BEFORE)
    after = check_pipeline(module, "loop-online-attention", seeds=(0, 1))
    keys, e = module.body.ops[0].body.args[1].type.shape[-2:]
    if keys == 1 or e == 1:
        return  # one key or one feature: that reduction is no loop
    (kernel,) = _kernels(after)
    reds = [op for op in kernel.walk() if isinstance(op, ReduceOp)]
    assert [r.attributes["monoids"] for r in reds] == [("online",), ("add",)]
    assert len(reds[0].results) == 3 and reds[0].is_ancestor_of(reds[1])  # (m, l, o), the scores inside


@SETTINGS
@given(attention_programs())
def test_pass_is_idempotent(module):
    run_pipeline(module, BEFORE + ",loop-online-attention")
    once = module.clone()
    run_pipeline(module, "loop-online-attention")
    assert str(module) == str(once)


def test_fully_masked_rows_give_what_pytorch_gives():
    """SDPA (the safe softmax) gives zeros where every key is masked out, the written-out softmax NaN, as in
    PyTorch; the folded kernel keeps both."""
    import torch
    import torch.nn.functional as F

    q, k, v = torch.randn(1, 1, 3, 4), torch.randn(1, 1, 5, 4), torch.randn(1, 1, 5, 2)
    keep = torch.ones(3, 5, dtype=torch.bool)
    keep[1] = False
    for safe, want in ((True, F.scaled_dot_product_attention(q, k, v, attn_mask=keep)), (False, None)):

        def build(b, q_, k_, v_, m_, safe=safe):
            s = b.ew("mul", matmul(b, q_, k_, w_transposed=True), 0.5)
            s = b.select(b.broadcast_to(m_, s.type.shape), s, float("-inf"))
            return [matmul(b, softmax(b, s, -1, safe=safe), v_)]

        types = [tensor(f32, 1, 1, 3, 4), tensor(f32, 1, 1, 5, 4), tensor(f32, 1, 1, 5, 2), tensor(boolean, 3, 5)]
        module = loopgen.tensor_module(types, ["q", "k", "v", "m"], build)
        run_pipeline(module, BEFORE + ",loop-online-attention")
        assert len(_kernels(module)) == 1
        (got,) = interpret(module, [q.numpy(), k.numpy(), v.numpy(), keep.numpy()])
        if want is None:
            want = torch.softmax((q @ k.mT * 0.5).masked_fill(~keep, float("-inf")), -1) @ v
            assert want[0, 0, 1].isnan().all()
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)
