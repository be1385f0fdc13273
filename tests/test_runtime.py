"""The runtime without a GPU: has_gpu's clean False, NVRTC compilation with its cache and its error rendering."""

from __future__ import annotations

import pytest

from irforge.diagnostics import IRForgeError
from irforge.runtime import driver, nvrtc
from irforge.runtime.nvrtc import CompileError, compile_cuda, default_arch

GOOD = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n'
BAD = """\
#include "irforge_prelude.cuh"
extern "C" __global__ void k_bad(float* x) {
  const float v = x[threadIdx.x];
  x[threadIdx.x] = v * undefined_scale;
}
"""


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IRFORGE_CACHE_DIR", str(tmp_path / "cache"))


def test_has_gpu_is_false_here_and_when_cuinit_raises(monkeypatch):
    if driver.has_gpu():
        pytest.skip("this machine has a GPU")
    from cuda.bindings import driver as cu

    def boom(flags):
        raise RuntimeError("no libcuda")

    monkeypatch.setattr(cu, "cuInit", boom)
    assert driver.has_gpu.__wrapped__() is False
    assert default_arch() == "sm_90a"


def test_cache_hits_and_keys(tmp_path):
    first = compile_cuda(GOOD, "k", arch="sm_90a")
    again = compile_cuda(GOOD, "k", arch="sm_90a")
    assert not first.cached and again.cached and again.image == first.image
    assert (tmp_path / "cache" / "cubin" / f"{first.key}.cubin").exists()
    other_arch = compile_cuda(GOOD, "k", arch="sm_80")
    other_opts = compile_cuda(GOOD, "k", arch="sm_90a", options=["-DIRF_UNUSED=1"])
    other_src = compile_cuda(GOOD.replace("2.0f", "3.0f"), "k", arch="sm_90a")
    assert len({first.key, other_arch.key, other_opts.key, other_src.key}) == 4
    assert not compile_cuda(GOOD, "k", arch="sm_90a", use_cache=False).cached


def test_compile_error_quotes_the_cuda_line_with_a_caret():
    with pytest.raises(CompileError) as e:
        compile_cuda(BAD, "k_bad", arch="sm_90a")
    lines = e.value.render().splitlines()
    assert lines[0] == 'k_bad.cu:4:24: error: NVRTC: identifier "undefined_scale" is undefined'
    assert lines[1] == "  x[threadIdx.x] = v * undefined_scale;"
    assert lines[2] == " " * 23 + "^"
    assert isinstance(e.value, IRForgeError)


def test_nvrtc_version_and_headers():
    assert nvrtc.nvrtc_version() >= (12, 0)
    assert nvrtc.include_dirs(), "no CUDA headers (cuda_fp16.h) found in the pip wheels"


def test_executor_without_a_gpu_says_so():
    if driver.has_gpu():
        pytest.skip("this machine has a GPU")
    from irforge.builtin import ModuleOp
    from irforge.runtime import Executor

    with pytest.raises(IRForgeError, match="needs a CUDA GPU"):
        Executor(ModuleOp())
