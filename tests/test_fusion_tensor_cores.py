"""Fusion keeps contractions on the tensor cores (passes/loop/tensor_cores.py): attention projected through the
heads' transpose (the o projection of a decoder layer), random in shape, mask and type, gives the same answer at
the loop level as at the tensor level, and in 16-bit types the projection reads plain loads (tensorized at the
tile level) while the attention itself writes the transposed, rounded output."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from irforge.dialects import tile as T
from irforge.dialects.loop import KernelOp, ReduceOp, StoreOp
from irforge.passes.loop.tensor_cores import products
from loopgen import tensor_module

from irforge.pass_manager import run_pipeline
from irforge.printer import print_module
from irforge.target import Target, use_target
from irforge.testing import check_pipeline
from irforge.types import bf16, f16, f32, tensor

SETTINGS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def projected_attention(draw):
    """softmax(q kᵀ / √e [causal]) v over kv_heads * group heads of `s` queries and keys, rounded to the type,
    transposed to [s, heads * e] and multiplied by an nn.Linear weight [n, heads * e]; returns (module, shape)."""
    from irforge.passes.torch_to_tensor.attention import _share_heads
    from irforge.passes.torch_to_tensor.common import matmul, softmax

    dtype = draw(st.sampled_from([f32, bf16, f16]))
    kv_heads, group = draw(st.sampled_from((1, 2))), draw(st.sampled_from((1, 2)))
    s, e, n = draw(st.sampled_from((16, 32))), draw(st.sampled_from((16, 32))), draw(st.sampled_from((16, 48)))
    causal = draw(st.booleans())
    heads = kv_heads * group
    acc = f32

    def build(b, q, k, v):
        if group > 1:
            k, v = _share_heads(b, k, heads), _share_heads(b, v, heads)
        scores = b.ew("mul", matmul(b, q, k, w_transposed=True, out_dtype=acc), 1.0 / math.sqrt(e))
        shape = scores.type.shape
        if causal:
            scores = b.select(b.ew("le", b.iota(3, shape), b.iota(2, shape)), scores, float("-inf"))
        out = b.cast(matmul(b, softmax(b, scores, -1, safe=True), b.cast(v, acc)), dtype)
        rows = b.reshape(b.permute(out, [0, 2, 1, 3]), (1, s, heads * e))
        w = b.param("w", tensor(dtype, n, heads * e))
        return [b.cast(matmul(b, rows, w, w_transposed=True, out_dtype=acc), dtype)]

    types = [tensor(dtype, 1, heads, s, e), tensor(dtype, 1, kv_heads, s, e), tensor(dtype, 1, kv_heads, s, e)]
    return tensor_module(types, ["q", "k", "v"], build), (s, n, heads * e)


@SETTINGS
@given(projected_attention())
def test_attention_and_its_projection_keep_the_answer_and_the_tensor_cores(drawn):
    module, (s, n, width) = drawn
    loop = check_pipeline(module, "tensor-to-loop", seeds=(0, 1))
    dtype = module.body.ops[0].body.args[0].type.dtype
    found = [p for k in loop.walk() if isinstance(k, KernelOp) for p in products(k)]
    if dtype == f32:
        assert not found  # no 16-bit products: fusion decided by work alone
        return
    text = print_module(loop)
    (proj,) = [p for p in found if p.shape == (s, n, width)]
    assert proj.why_not is None, text
    # the attention, one online reduction, stores its rounded output in [s, heads * e] order: the projection's A
    factor_buffers = {op.buffer for op in proj.reduce.walk() if op.name == "loop.load"}
    (written,) = [op for op in loop.walk() if isinstance(op, StoreOp) and op.buffer in factor_buffers]
    # one head: [1, 1, s, e] is [1, s, heads * e] in memory, and the projection reads the attention's own output
    heads = width // written.buffer.type.shape[-1]
    assert written.buffer.type in (tensor(dtype, 1, s, width), tensor(dtype, 1, heads, s, width)), text
    writer = next(a for a in written.ancestors() if isinstance(a, KernelOp))
    monoids = [r.attributes["monoids"] for r in writer.walk() if isinstance(r, ReduceOp)]
    assert ("online",) in monoids, text
    with use_target(Target(arch="sm_90a")):
        run_pipeline(loop, "loop-to-tile")
    atoms = [lp.attributes["atom"] for lp in loop.walk() if isinstance(lp, T.ForOp) and "atom" in lp.attributes]
    assert atoms, print_module(loop)


def test_attention_keeps_its_weights_loaded_when_a_bias_makes_them():
    """V = v_proj(x) + bias in bf16 (Qwen2's attention): the bias add stays out of P @ V (it would compute V in
    the attention's loop), so the attention reaches the tensor cores at the tile level; the answer is kept."""
    from irforge.passes.torch_to_tensor.common import matmul, softmax

    s, e = 64, 64

    def build(b, q, k, v):
        bias = b.param("bias", tensor(bf16, e))
        v = b.cast(b.ew("add", b.cast(v, f32), b.cast(bias, f32)), bf16)
        scores = b.ew("mul", matmul(b, q, k, w_transposed=True, out_dtype=f32), 1.0 / math.sqrt(e))
        return [b.cast(matmul(b, softmax(b, scores, -1, safe=True), b.cast(v, f32)), bf16)]

    module = tensor_module([tensor(bf16, 1, 1, s, e)] * 3, ["q", "k", "v"], build)
    loop = check_pipeline(module, "tensor-to-loop", seeds=(0,))
    (attention,) = [k for k in loop.walk() if isinstance(k, KernelOp) and any(
        r.attributes["monoids"] == ("online",) for r in k.walk() if isinstance(r, ReduceOp))]  # fmt: skip
    assert not any(op.name == "scalar.add" for op in attention.walk()), print_module(loop)
    with use_target(Target(arch="sm_90a")):
        run_pipeline(loop, "loop-to-tile")
    tiled = [k for k in loop.walk() if isinstance(k, T.KernelOp) and k.sym_name == attention.sym_name]
    assert any("atom" in lp.attributes for lp in tiled[0].walk() if isinstance(lp, T.ForOp)), print_module(loop)
