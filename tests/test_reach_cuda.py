"""A program that reaches the loop level reaches CUDA: generated contractions (the shapes of decoder layers'
projections and attention products, transposed operands, batch broadcasts, prologues and epilogues, f32 and half
types) and reductions (softmax, norms, row reductions, long rows) go through the default pipeline and compile with
NVRTC for sm_90a, and no kernel of a program with a contraction spills registers at the default schedule (ptxas'
report, read offline: no GPU needed). The corpus programs take the same path in test_corpus_schedules.py."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from irforge.dialects import tile as T
from irforge.dialects.cuda import ops as C
from irforge.dialects.tile.algebra import contractions_in
from loopgen import contraction_programs, softmax, tensor_module

from irforge.pass_manager import run_pipeline
from irforge.runtime.nvrtc import resource_usage
from irforge.target import target
from irforge.types import bf16, f16, f32, tensor

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))


def _compiled(module) -> dict:
    """{kernel: ptxas' resource usage} of a tile-level module lowered to CUDA and compiled for sm_90a."""
    run_pipeline(module, "tile-to-kernel,kernel-to-cuda")
    kernels = [op for op in module.body.ops if isinstance(op, C.CudaKernelOp)]
    source = "\n".join(k.attributes["source"] for k in kernels)  # the prelude is `#pragma once`
    usage = resource_usage(source, kernels[0].attributes["sym_name"], arch="sm_90a")
    assert set(usage) == {k.attributes["sym_name"] for k in kernels}
    return usage


def _assert_no_spills(usage: dict) -> None:
    for name, u in usage.items():
        assert not u.spills, f"{name} spills at the default schedule: {u}"


@SETTINGS
@given(
    contraction_programs(
        dims=st.sampled_from((1, 7, 32, 64, 128, 512, 2048, 5632)), ks=st.sampled_from((64, 100, 2048, 5632))
    )
)
def test_contractions_reach_cuda_without_spilling(module):
    run_pipeline(module, "tensor-to-loop,loop-to-tile")
    _assert_no_spills(_compiled(module))


@pytest.mark.parametrize(
    "dtype, batch, m, n, k, w_transposed, silu, one_block",
    [
        (f32, (), 32, 32, 64, True, False, True),
        (f16, (), 32, 128, 2048, True, False, True),
        (f16, (), 512, 5632, 64, False, True, True),
        (f16, (), 2048, 2048, 2048, True, True, True),
        (f32, (2,), 7, 512, 100, True, False, False),
    ],
    ids=[
        "f32-register-tiles",
        "f16-split-k-on-mma",
        "f16-silu-on-mma",
        "f16-silu-warp-specialized",
        "f32-batched-scale-residual",
    ],
)
def test_small_contractions_compile_without_spilling(dtype, batch, m, n, k, w_transposed, silu, one_block):
    """Regressions (the test above drew them):
    - x [32, 64] @ wᵀ in f32, one block of 16 threads holding 8 x 8 register tiles: ptxas capped it at 168 registers
      under a bare `__launch_bounds__(16)` and spilled 36 stores;
    - x [32, 2048] (f32 cast to f16) @ wᵀ [128, 2048] split over K on mma atoms: 72 registers, 4 spill stores;
    - silu(x [512, 64] @ w [64, 5632]) in f16 on mma (w not K-major): its epilogue, SiLU over 128 accumulators a
      thread computed op by op into arrays of their own, spilled 128 stores;
    - silu(x [2048, 2048] @ wᵀ) in f16 on wgmma with a producer warpgroup: the same epilogue in the consumers'
      branch (232 registers) spilled 324 bytes;
    - (x [2, 7, 100] * 0.5) @ wᵀ [2, 512, 100] + a residual in f32: 224 threads carrying 4 accumulators and loading
      20 values a K step, under a bare `__launch_bounds__(224)` held at 56 registers, spilled 8 bytes.
    A kernel with a register tile or tensor-core fragments now says one block a multiprocessor suffices, and an
    epilogue's elementwise chain is computed element by element in one loop; a small-tile loop holding more than
    full occupancy's registers allow gets no bound."""
    from irforge.passes.torch_to_tensor.common import matmul

    def build(b, x, *res):
        a = x if x.type.dtype == dtype else b.cast(x, dtype)
        if res:
            a = b.ew("mul", a, 0.5)
        w = b.param("w", tensor(dtype, *batch, *((n, k) if w_transposed else (k, n))))
        y = matmul(b, a, w, w_transposed=w_transposed, out_dtype=f32)
        if silu:
            y = b.ew("mul", y, b.ew("sigmoid", y))
        if res:
            y = b.ew("add", y, res[0])
        return [b.cast(y, dtype)]

    residual = [tensor(f32, *batch, m, n)] if batch else []
    module = tensor_module(
        [tensor(dtype if silu else f32, *batch, m, k), *residual], ["x", "res"][: 1 + len(residual)], build
    )
    run_pipeline(module, "tensor-to-loop,loop-to-tile")
    usage = _compiled(module)
    _assert_no_spills(usage)
    sources = [op.attributes["source"] for op in module.body.ops if isinstance(op, C.CudaKernelOp)]
    if one_block:
        assert any(", 1) k_" in src for src in sources)  # launch-bounded to one block a multiprocessor


@SETTINGS
@example(f32, 128, 5632, 2048)  # HF TinyLlama's decoder layer at 128 tokens
@given(
    st.sampled_from([f32, f16, bf16]),
    st.sampled_from((1, 32, 128, 512)),
    st.sampled_from((256, 2048, 5632)),
    st.sampled_from((64, 2048)),
)
def test_gated_products_reach_cuda_without_spilling(dtype, m, n, k):
    """An MLP's first half as a decoder layer has it: RMSNorm(x + r) · w, then silu(h @ W_gateᵀ) * (h @ W_upᵀ). The
    products share h, so they fuse into one reduction of two carriers, whose register tiles or fragments hold twice
    one product's accumulators beside the norm's prologue. No kernel spills, nor sits at the register limit, one ptxas
    change from spilling: in f32 at 128 rows, 8 x 8 tiles of each carrier took all 255 registers here, and spilled 24
    stores in HF's decoder layer (4 x 8 tiles: 168)."""
    from irforge.passes.torch_to_tensor.common import matmul

    def build(b, x, r):
        s = b.cast(b.ew("add", x, r), f32)
        ms = b.ew("div", b.reduce("add", b.ew("mul", s, s), [1]), float(k))
        h = b.ew("mul", b.ew("mul", s, b.ew("rsqrt", b.ew("add", ms, 1e-5))), b.param("wn", tensor(f32, k)))
        h = b.cast(h, dtype)
        g = matmul(b, h, b.param("wg", tensor(dtype, n, k)), w_transposed=True, out_dtype=f32)
        u = matmul(b, h, b.param("wu", tensor(dtype, n, k)), w_transposed=True, out_dtype=f32)
        return [b.cast(b.ew("mul", b.ew("mul", g, b.ew("sigmoid", g)), u), dtype)]

    module = tensor_module([tensor(dtype, m, k), tensor(dtype, m, k)], ["x", "r"], build)
    run_pipeline(module, "tensor-to-loop,loop-to-tile")
    assert any(isinstance(op, T.ReduceOp) and len(op.results) == 2 for op in module.walk())  # fused: 2 carriers
    usage = _compiled(module)
    _assert_no_spills(usage)
    limit = target().max_registers_per_thread
    assert all(u.registers < limit for u in usage.values()), f"a kernel at the {limit}-register limit: {usage}"


@st.composite
def reduction_programs(draw):
    """Row reductions at the sizes of decoder layers and logits: softmax (or log-softmax), RMSNorm, a sum or max
    over the last or a middle axis; f32 or half types."""
    dtype = draw(st.sampled_from([f32, f16, bf16]))
    rows = draw(st.sampled_from((1, 3, 32, 128)))
    cols = draw(st.sampled_from((64, 1000, 2048, 4096, 152064)))
    kind = draw(st.sampled_from(("softmax", "log_softmax", "rms_norm", "sum", "max", "middle")))

    def build(b, x):
        h = b.cast(x, f32)
        if kind in ("softmax", "log_softmax"):
            out = softmax(b, h, 1, kind == "log_softmax")
        elif kind == "rms_norm":
            ms = b.ew("div", b.reduce("add", b.ew("mul", h, h), [1]), float(cols))
            out = b.ew("mul", h, b.ew("rsqrt", b.ew("add", ms, 1e-6)))
        elif kind == "middle":
            out = b.reduce("add", b.reshape(h, (rows, 2, cols // 2) if cols % 2 == 0 else (rows, 1, cols)), [1])
        else:
            out = b.reduce({"sum": "add", "max": "max"}[kind], h, [1])
        return [b.cast(out, dtype)]

    return tensor_module([tensor(dtype, rows, cols)], ["x"], build)


@SETTINGS
@given(reduction_programs())
def test_reductions_reach_cuda(module):
    run_pipeline(module, "tensor-to-loop,loop-to-tile")
    assert _compiled(module)


@pytest.mark.slow
@pytest.mark.parametrize("dtype, seq", [("float32", 128), ("bfloat16", 512)])
def test_hf_llama_decoder_layer_reaches_cuda(dtype, seq):
    """HF's `LlamaDecoderLayer` at TinyLlama's config, a causal prefill: f32 at 128 tokens (it once failed in
    lower-to-kernel: a staged box [.., 64, 1] read along its 64 as one vector) and bf16 at 512 (the llm suite's
    D3, whose SIMT attention once spilled 2564 stores when its loops' elementwise chains were printed inlined):
    every kernel compiles, none spills, and on a GPU the layer matches eager."""
    pytest.importorskip("transformers")
    import torch

    from irforge.bench.models import TINYLLAMA, decoder_layer, rope_tables
    from irforge.compiler import compile as compile_model
    from irforge.runtime import has_gpu

    torch.manual_seed(0)
    t = getattr(torch, dtype)
    cos, sin = rope_tables(TINYLLAMA, torch.arange(seq)[None], t)
    layer = decoder_layer(TINYLLAMA).to(t).eval()
    prog = compile_model(layer, torch.randn(1, seq, TINYLLAMA.hidden, dtype=t), cos, sin, ir="tile")
    assert any(contractions_in(k) for k in prog.module.walk() if isinstance(k, T.KernelOp))
    _assert_no_spills(_compiled(prog.module))
    if has_gpu():
        from irforge.runner import check_on_gpu

        prog = dataclasses.replace(prog, level="cuda")
        for i, (_, c) in enumerate(check_on_gpu(prog)):
            assert c.ok, f"output #{i}: {c}"
