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


def test_resource_usage_shares_the_executors_cache_entry():
    """ptxas' report (what the tuner prunes with) comes with every compile, from a cache hit too: the CUBIN the
    executor loads is the one whose counts were read. A kernel that needs more registers than allowed spills,
    and the report says so."""
    first = compile_cuda(GOOD, "k", arch="sm_90a")
    assert nvrtc.resource_usage(GOOD, "k", arch="sm_90a") == nvrtc.parse_resource_usage(first.log)
    assert compile_cuda(GOOD, "k", arch="sm_90a", options=["--ptxas-options=-v"]).key == first.key
    r = nvrtc.resource_usage(GOOD, "k", arch="sm_90a")["k"]
    assert 1 <= r.registers <= 32 and r.spill_stores == r.smem == 0
    spilling = """\
extern "C" __global__ void __launch_bounds__(1024, 2) s(float* x) {
  __shared__ float t[64];
  float a[96];
  for (int i = 0; i < 96; ++i) a[i] = x[i * blockDim.x + threadIdx.x];
  for (int j = 0; j < 8; ++j) for (int i = 0; i < 96; ++i) a[i] = a[i] * a[(i + j) % 96] + 1.0f;
  t[threadIdx.x % 64] = a[0];
  for (int i = 0; i < 96; ++i) x[i * blockDim.x + threadIdx.x] = a[i] + t[i % 64];
}
"""
    r = nvrtc.resource_usage(spilling, "s", arch="sm_90a")["s"]
    assert r.registers <= 32 and r.spills and r.smem == 256


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


def test_command_line_compiles_ir_and_reports_errors(tmp_path):
    import io

    from irforge.dialects.kernel import examples

    from irforge.runtime.__main__ import main

    ir = tmp_path / "m.ir"
    ir.write_text(examples.row_sum(4, 256).ir)
    out, err = io.StringIO(), io.StringIO()
    assert main([str(ir), "--arch", "sm_90a", "-o", str(tmp_path / "o")], out, err) == 0
    line = out.getvalue()
    assert line.startswith("k_row_sum: ") and "for sm_90a; Used " in line and "spills 0/0 B" in line
    assert (tmp_path / "o" / "k_row_sum.cubin").read_bytes()[:4] == b"\x7fELF"
    assert (tmp_path / "o" / "k_row_sum.cu").read_text().startswith("// k_row_sum:")
    cu = tmp_path / "bad.cu"
    cu.write_text(BAD)
    out, err = io.StringIO(), io.StringIO()
    assert main([str(cu)], out, err) == 1
    assert err.getvalue().startswith("bad.cu:4:24: error: NVRTC: identifier")
