"""The runtime without a GPU: has_gpu's clean False, NVRTC compilation with its cache and its error rendering."""

from __future__ import annotations

import re

import pytest

from irforge.diagnostics import IRForgeError
from irforge.runtime import cubin, driver, nvrtc
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


SPILLING = """\
extern "C" __global__ void __launch_bounds__(1024, 2) s(float* x) {
  __shared__ float t[64];
  float a[96];
  for (int i = 0; i < 96; ++i) a[i] = x[i * blockDim.x + threadIdx.x];
  for (int j = 0; j < 8; ++j) for (int i = 0; i < 96; ++i) a[i] = a[i] * a[(i + j) % 96] + 1.0f;
  t[threadIdx.x % 64] = a[0];
  for (int i = 0; i < 96; ++i) x[i * blockDim.x + threadIdx.x] = a[i] + t[i % 64];
}
"""


def test_an_empty_log_leaves_the_interpreters_bytes_alone():
    """NVRTC writes its log and the CUBIN into buffers it is given. An empty log is one NUL byte: written into an
    immutable `b" " * 1`, that is the interpreter's shared one-byte object, and `" ".encode()` came out as NUL."""
    compiled = compile_cuda(GOOD, "k", arch="sm_90a", use_cache=False)
    assert compiled.log == "" and compiled.image[:4] == b"\x7fELF"
    assert bytes([32])[0] == 32 and bytes([32]).decode() == " "


def test_resource_usage_reads_the_executors_cubin():
    """The counts (what the tuner prunes with) come from the CUBIN of the cache entry the executor loads, a cache
    hit too. A kernel that needs more registers than its launch bounds allow spills into a stack frame."""
    first = compile_cuda(GOOD, "k", arch="sm_90a")
    assert nvrtc.resource_usage(GOOD, "k", arch="sm_90a") == cubin.resource_usage(first.image)
    assert compile_cuda(GOOD, "k", arch="sm_90a").cached
    r = nvrtc.resource_usage(GOOD, "k", arch="sm_90a")["k"]
    assert 1 <= r.registers <= 32 and r.stack_frame == r.smem == 0 and not r.spills
    r = nvrtc.resource_usage(SPILLING, "s", arch="sm_90a")["s"]
    assert r.registers <= 32 and r.spills and r.smem == 256


_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame")
_PTXAS_USED = re.compile(r"Used (\d+) registers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")


def _ptxas_report(log: str) -> dict[str, cubin.ResourceUsage]:
    """What ptxas prints under `--ptxas-options=-v`: the reference the CUBIN's counts are checked against."""
    out, name, frame = {}, None, 0
    for line in log.splitlines():
        if m := _PTXAS_ENTRY.search(line):
            name, frame = m.group(1), 0
        elif name and (m := _PTXAS_FRAME.search(line)):
            frame = int(m.group(1))
        elif name and (m := _PTXAS_USED.search(line)):
            smem = _PTXAS_SMEM.search(line)
            out[name] = cubin.ResourceUsage(int(m.group(1)), frame, int(smem.group(1)) if smem else 0)
    return out


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_cubin_counts_agree_with_ptxas_report(arch):
    """Registers, stack frame and static shared memory read from the image equal what ptxas prints for the same
    compile, per kernel of a unit of several: none, static and dynamic-only shared memory, and a spilling one."""
    source = "\n".join(
        [
            GOOD,
            SPILLING,
            'extern "C" __global__ void st(float* x) { __shared__ float s[1000]; s[threadIdx.x] = x[threadIdx.x];'
            " __syncthreads(); x[threadIdx.x] = s[999 - threadIdx.x]; }",
            'extern "C" __global__ void dyn(float* x) { extern __shared__ float d[]; d[threadIdx.x] = x[threadIdx.x];'
            " __syncthreads(); x[threadIdx.x] = d[3 - threadIdx.x]; }",
        ]
    )
    compiled = compile_cuda(source, "several", arch=arch, options=["--ptxas-options=-v"])
    reported = _ptxas_report(compiled.log)
    if not reported:
        pytest.skip("this NVRTC's log carries no ptxas report to check against")
    got = cubin.resource_usage(compiled.image)
    assert got == reported
    assert got["st"].smem == 4000 and got["dyn"].smem == 0 and got["s"].spills and not got["k"].spills


def test_a_file_that_is_no_cubin_is_one_message(tmp_path):
    with pytest.raises(IRForgeError, match="not a CUBIN: not a little-endian 64-bit ELF image"):
        cubin.resource_usage(b"#!/bin/sh\n")
    with pytest.raises(IRForgeError, match="not a CUBIN: its ELF headers are cut short"):
        cubin.resource_usage(compile_cuda(GOOD, "k", arch="sm_90a").image[:80])


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
    assert line.startswith("k_row_sum: ") and "for sm_90a; " in line and " registers, " in line
    assert line.rstrip().endswith(", 0 bytes of stack frame")
    assert (tmp_path / "o" / "k_row_sum.cubin").read_bytes()[:4] == b"\x7fELF"
    assert (tmp_path / "o" / "k_row_sum.cu").read_text().startswith("// k_row_sum:")
    cu = tmp_path / "bad.cu"
    cu.write_text(BAD)
    out, err = io.StringIO(), io.StringIO()
    assert main([str(cu)], out, err) == 1
    assert err.getvalue().startswith("bad.cu:4:24: error: NVRTC: identifier")


def test_resource_usage_compiles_and_reads_spills():
    """A contraction kernel whose threads hold 8 x 8 accumulators compiles without spilling; asked to fit 32 blocks
    of 64 threads on a multiprocessor (32 registers a thread), ptxas spills, and its CUBIN says so (read from a cached
    compile, no GPU)."""
    from irforge.dialects.cuda import ops as C

    from irforge.parser import parse_module
    from irforge.pass_manager import run_pipeline
    from irforge.runtime.nvrtc import resource_usage

    text = """func.func @forward(%x: f32[128,64], %w: f32[64,128]) -> f32[128,128] {
  %y = loop.buffer f32[128,128]
  loop.kernel @k_mm {
    loop.for %a0 in 0..128 {
      loop.for %a1 in 0..128 {
        %s = loop.reduce %r in 0..64 add(0.0) -> f32 {
          %a = loop.load %x[%a0, %r]
          %b = loop.load %w[%r, %a1]
          %p = scalar.mul %a, %b : f32
          loop.yield %p
        }
        loop.store %y[%a0, %a1] = %s
      }
    }
  }
  func.return %y
}
"""
    m = parse_module(text)
    schedule = "map-to-tile,tile-blockify{bm=64 bn=64 threads=64},tile-register-tile{tm=8 tn=8},tile-chunk-reduce"
    run_pipeline(m, f"{schedule},tile-stage-inputs,tile-to-kernel,kernel-to-cuda")
    (k,) = [op for op in m.body.ops if isinstance(op, C.CudaKernelOp)]
    src = k.attributes["source"]
    free = resource_usage(src, "k_mm", arch="sm_90a")["k_mm"]
    assert free.registers > 64 and not free.spills and free.smem > 0
    assert "__launch_bounds__(64, 1)" in src  # an 8 x 8 register tile: one block a multiprocessor is enough
    capped = resource_usage(src.replace("__launch_bounds__(64, 1)", "__launch_bounds__(64, 32)"), "k_mm", arch="sm_90a")
    capped = capped["k_mm"]
    assert capped.registers <= 32 and capped.spills and capped.stack_frame > 0
    assert resource_usage(src, "k_mm", arch="sm_90a")["k_mm"] == free  # from the cached CUBIN
