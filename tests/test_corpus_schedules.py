"""Every corpus program through the GPU levels, on a CPU: after each pass of `loop-to-tile` the tile interpreter
matches the loop interpreter (the program's own inputs and params), after `tile-to-kernel` the kernel simulator
does, and after `kernel-to-cuda` every kernel compiles with NVRTC for sm_90a (one translation unit per program;
NVRTC's disk cache makes reruns fast)."""

from __future__ import annotations

import dataclasses

import pytest
from irforge.dialects.cuda import ops as C
from test_corpus import PROGRAMS, captured

from irforge.compiler import compile_program
from irforge.interpreter import interpret
from irforge.pass_manager import run_pipeline
from irforge.pipeline import module_level
from irforge.registry import registry
from irforge.testing import compare_outputs, output_types


def _pipeline(name: str) -> list[str]:
    """The elements of a named pipeline (its passes, in order)."""
    text = registry().pipelines()[name].text
    lines = [ln.split("#")[0].strip() for ln in text.splitlines()]
    return [p.strip() for p in "".join(lines).split(",") if p.strip()]


def _assert_matches(reference, module, prog, what: str) -> None:
    got = interpret(module, prog.inputs, prog.params)
    for i, c in enumerate(compare_outputs(got, reference, output_types(module))):
        assert c.ok, f"{what}: output #{i}: {c}"


@pytest.mark.parametrize("name", [n for n, _ in PROGRAMS])
def test_corpus_program_lowers_to_cuda_and_matches_at_every_step(name):
    prog = captured(name)  # captured once for every corpus test
    m = prog.module.clone()
    run_pipeline(m, "torch-to-tensor,tensor-to-loop")
    prog = dataclasses.replace(prog, module=m, level="loop")
    reference = interpret(m, prog.inputs, prog.params)
    for p in _pipeline("loop-to-tile"):
        before = str(m)
        run_pipeline(m, p)
        if str(m) != before:  # a pass that changed nothing cannot change the answer: the program is the same
            _assert_matches(reference, m, prog, f"after {p}")
    assert module_level(m) == "tile"
    run_pipeline(m, "tile-to-kernel")
    assert module_level(m) == "kernel"
    _assert_matches(reference, m, prog, "after tile-to-kernel (kernel simulator)")
    run_pipeline(m, "kernel-to-cuda")
    kernels = [op for op in m.body.ops if isinstance(op, C.CudaKernelOp)]
    assert kernels
    from irforge.runtime.nvrtc import compile_cuda

    source = "\n".join(k.attributes["source"] for k in kernels)  # the prelude is `#pragma once`
    compile_cuda(source, kernels[0].attributes["sym_name"], arch="sm_90a")


def test_the_seed_rms_norm_is_one_reduce_kernel_staging_its_input():
    """`irforge compile -c "nn.RMSNorm(2048)(torch.randn(1,32,2048))" --ir cuda`: one kernel, the row of x copied
    into shared memory once, 16-byte accesses, a warp-shuffle + shared-memory combine."""
    from irforge import frontend

    prog = compile_program(frontend.from_snippet("nn.RMSNorm(2048)(torch.randn(1,32,2048))"), "cuda")
    (k,) = [op for op in prog.module.body.ops if isinstance(op, C.CudaKernelOp)]
    src = k.attributes["source"]
    assert k.attributes["grid"] == (32, 1, 1) and k.attributes["block"] == (128, 1, 1)  # 64 bytes of a row per thread
    assert "__shared__ __align__(128) float x_smem[2048]" in src
    assert src.count("irf_load(") >= 3 and "__shfl_xor_sync" in src and "__syncthreads()" in src
    assert src.count(" x + ") == 1  # x leaves global memory in one place: the copy into shared memory


def test_the_param_store_holds_exactly_the_params_the_lowered_program_reads():
    """BatchNorm's `num_batches_tracked` is captured but read by nothing: the cuda-level program has no param for it,
    and the executor refuses params a program does not have, so the store must not hand it over."""
    entry = dict(PROGRAMS)["batch_norm_eval_f16"]
    from irforge import frontend

    prog = compile_program(frontend.from_snippet(entry["code"].strip()), "cuda")
    read = {op.attributes["sym"].name for op in prog.module.walk() if isinstance(op, C.ParamOp)}
    assert read == set(prog.params) == {"m.weight", "m.bias", "m.running_mean", "m.running_var"}
