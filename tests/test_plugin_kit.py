"""The plugin kit, through real installs: `irforge new-plugin NAME` writes a plugin whose own tests (numeric and lit)
pass as written and whose pass runs in `irforge compile`; a plugin adds a scalar op to the table with its numpy
semantics and CUDA spelling, and it works from the tensor level down to NVRTC."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from irforge.tools import new_plugin
from test_plugins import pip_install

BIN = os.path.dirname(sys.executable)
PLUGINS = str(Path(__file__).parent / "plugins")


def env_with(*paths) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, paths), PLUGINS])}


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory):
    root = tmp_path_factory.mktemp("new-plugin")
    out = subprocess.run(
        [os.path.join(BIN, "irforge"), "new-plugin", "fold-negations", "-o", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    src = root / "irforge-fold-negations"
    written = sorted(str(p.relative_to(src)) for p in src.rglob("*") if p.is_file())
    pip_install(src, root / "site")
    return src, root / "site", written


def test_the_scaffold_passes_its_own_tests(scaffolded):
    src, site, written = scaffolded
    assert written == [
        "irforge_fold_negations.py",
        "pyproject.toml",
        "tests/lit/fold-negations.ir",
        "tests/lit/lit.cfg.py",
        "tests/test_irforge_fold_negations.py",
        "tests/test_lit.py",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=src,
        env=env_with(site),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0 and "3 passed" in proc.stdout, proc.stdout + proc.stderr


def test_the_scaffolded_pass_runs_in_irforge_compile(scaffolded):
    _, site, _ = scaffolded
    snippet = "x = torch.randn(4, 8); torch.exp(-(-x))"
    argv = [os.path.join(BIN, "irforge"), "compile", "-c", snippet, "--after", "torch-to-tensor=fold-negations", "-v"]
    proc = subprocess.run(argv, env=env_with(site), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "pass fold-negations" in proc.stderr and "remark: [fold-negations] neg(neg(x)) folded to x" in proc.stderr
    assert "neg" not in proc.stdout and "tensor.elementwise exp %x : f32[4,8]" in proc.stdout
    argv = [os.path.join(BIN, "irforge"), "compile", "-c", snippet, "--pass-pipeline", "torch-to-tensor,fold-negations"]
    proc = subprocess.run([*argv, "--check"], env=env_with(site), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "neg" not in proc.stdout and "tensor.elementwise exp %x : f32[4,8]" in proc.stdout


def test_new_plugin_refuses_bad_names(tmp_path):
    assert not new_plugin._NAME.match("Fold_Negations") and new_plugin._NAME.match("fold-negations2")
    proc = subprocess.run(
        [os.path.join(BIN, "irforge"), "new-plugin", "cse", "-o", str(tmp_path)], capture_output=True, text=True
    )
    assert proc.returncode == 1 and "'cse' is already a pass or pipeline" in proc.stderr


SOFTPLUS = '''
"""A scalar op from a plugin: softplus(a) = log(1 + e ** a)."""

import numpy as np

from irforge.scalar_ops import ScalarOp

scalar_ops = (
    ScalarOp(
        "softplus",
        1,
        "math",
        lambda x: np.logaddexp(0, x),
        "irf_softplus",
        "log(1 + e ** a)",
        cuda_source="IRF_DEV float irf_softplus(float a) { return log1pf(expf(a)); }",
    ),
)
'''
SOFTPLUS_PYPROJECT = """
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "irforge-softplus"
version = "0.1.0"

[project.entry-points."irforge.scalar_ops"]
softplus = "irforge_softplus"

[tool.setuptools]
py-modules = ["irforge_softplus"]
"""
CHECK = """
import numpy as np
from irforge import parse_module, run_pipeline
from irforge.dialects.cuda.ops import CudaKernelOp
from irforge.interpreter import interpret
from irforge.runtime.nvrtc import compile_cuda

text = '''func.func @forward(%x: f32[64]) -> f32[64] {
  %y = tensor.elementwise softplus %x : f32[64]
  func.return %y
}
'''
x = np.linspace(-4, 4, 64, dtype=np.float32)
m = parse_module(text)
(y,) = interpret(m, [x])
assert np.allclose(y, np.log1p(np.exp(x.astype(np.float64))), rtol=1e-6), y
run_pipeline(m, "tensor-to-loop,loop-to-tile,tile-to-kernel")
(z,) = interpret(m, [x])  # the simulator, on the kernel level
assert np.allclose(z, y, rtol=1e-6)
run_pipeline(m, "kernel-to-cuda")
k = next(op for op in m.body.ops if isinstance(op, CudaKernelOp))
assert "irf_softplus(" in k.attributes["source"]
cubin = compile_cuda(k.attributes["source"], k.attributes["sym_name"], arch="sm_90a")
assert cubin.image[:4] == b"\\x7fELF"
print("ok")
"""


def test_a_plugin_scalar_op_runs_from_the_tensor_level_to_nvrtc(tmp_path):
    src = tmp_path / "softplus-src"
    src.mkdir()
    (src / "irforge_softplus.py").write_text(textwrap.dedent(SOFTPLUS))
    (src / "pyproject.toml").write_text(SOFTPLUS_PYPROJECT)
    pip_install(src, tmp_path / "site")
    proc = subprocess.run(
        [sys.executable, "-c", CHECK], env=env_with(tmp_path / "site"), capture_output=True, text=True, timeout=600
    )
    assert proc.stdout == "ok\n", proc.stderr
    clash = tmp_path / "clash-src"
    clash.mkdir()
    (clash / "irforge_softplus.py").write_text(SOFTPLUS.replace('"softplus",\n', '"exp",\n', 1))
    (clash / "pyproject.toml").write_text(SOFTPLUS_PYPROJECT)
    pip_install(clash, tmp_path / "clash")
    proc = subprocess.run(
        [os.path.join(BIN, "irforge-opt"), "--list-passes"],
        env=env_with(tmp_path / "clash"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (
        proc.returncode == 1
        and "scalar op 'exp' of plugin 'softplus' (irforge_softplus) from irforge-softplus 0.1.0 is already in the "
        "table"
        in proc.stderr
    ), proc.stderr
