"""Register tiles in several dimensions at the kernel level: tiles of one rank broadcast against each other (the
outer product of a column and a row), and loads and stores move strided tiles (runs along a unit-stride last
dimension as vectors). The simulator is checked against numpy; the emitted CUDA compiles with NVRTC."""

from __future__ import annotations

import numpy as np
import pytest
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel.simulator import run

from irforge.diagnostics import IRForgeError
from irforge.parser import parse_module
from irforge.pass_manager import run_pipeline
from irforge.printer import print_module
from irforge.runtime.nvrtc import compile_cuda
from irforge.types import TensorType, f32


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IRFORGE_CACHE_DIR", str(tmp_path / "cache"))


def outer_product(rows: int) -> str:
    """Each of 4 threads: a column a[4,1] (elements 8t, 8t+2, ... of x: stride 2), the row w[1,4], their [4,4] outer
    product stored as a block of y whose rows are `rows` apart."""
    params = "%x: !kernel.ptr<f32>, %w: !kernel.ptr<f32>, %y: !kernel.ptr<f32>"
    return f"""kernel.func @k_outer({params}) grid(1) block(4) {{
  %t = kernel.thread_id x
  %col = kernel.load %x[%t * 8] {{strides = [2, 0]}} : f32[4,1]
  %row = kernel.load %w[0] : f32[1,4]
  %prod = kernel.mul %col, %row : f32[4,4]
  kernel.store %prod, %y[%t * 4] {{strides = [{rows}, 1]}}
}}
func.func @forward(%x: f32[32], %w: f32[4]) -> f32[64] {{
  %y = kernel.alloc : f32[64]
  kernel.launch @k_outer(%x, %w, %y)
  func.return %y
}}
"""


def test_outer_product_of_strided_tiles_simulates_and_compiles():
    module = parse_module(outer_product(16))
    text = print_module(module)
    assert print_module(parse_module(text)) == text
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(32).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    (y,) = run(module, [x, w])
    want = np.zeros((4, 16), np.float32)
    for t in range(4):
        want[:, 4 * t : 4 * t + 4] = np.outer(x[t * 8 : t * 8 + 8 : 2], w)
    np.testing.assert_allclose(y, want.reshape(-1), rtol=1e-6)
    run_pipeline(module, "kernel-to-cuda")
    src = next(op for op in module.body.ops if op.name == "cuda.kernel").attributes["source"]
    assert src.count("irf_load_n<1>") == 4 and src.count("irf_store_n<4>") == 4
    assert compile_cuda(src, "k_outer", arch="sm_90a").image[:4] == b"\x7fELF"


def test_overlapping_strided_stores_are_reported():
    module = parse_module(outer_product(4))  # rows 4 apart: thread t's row i is thread t+1's row i-1
    with pytest.raises(IRForgeError, match="thread"):
        run(module, [np.ones(32, np.float32), np.ones(4, np.float32)])


def test_tile_shapes_must_broadcast():
    bad = outer_product(16).replace("%w[0] : f32[1,4]", "%w[0] : f32[2,2]")
    with pytest.raises(IRForgeError, match="do not broadcast"):
        parse_module(bad).verify()


def test_broadcast_rules():
    assert K.broadcast_shape([(8, 1), (1, 4)]) == (8, 4)
    assert K.broadcast_shape([(8, 4), (1, 4), (8, 1)]) == (8, 4)
    with pytest.raises(ValueError, match="do not broadcast"):
        K.broadcast_shape([(8, 2), (1, 4)])
    with pytest.raises(ValueError, match="one rank"):
        K.broadcast_shape([(8,), (1, 4)])
    assert K.tile_offsets((2, 4), (64, 1)) == [0, 1, 2, 3, 64, 65, 66, 67]
    assert K.access_runs(TensorType(f32, (2, 4)), (64, 1)) == (4, [(0, [0, 1, 2, 3]), (64, [4, 5, 6, 7])])
    assert K.access_runs(TensorType(f32, (4, 1)), (2, 0)) == (1, [(0, [0]), (2, [1]), (4, [2]), (6, [3])])
    # a run along the outer dimension (stride 1) fills tile positions 2 apart
    assert K.access_runs(TensorType(f32, (4, 2)), (1, 8)) == (4, [(0, [0, 2, 4, 6]), (8, [1, 3, 5, 7])])


def test_strided_smem_runs_must_stay_in_a_row():
    text = """kernel.func @k_rows(%x: !kernel.ptr<f32>, %y: !kernel.ptr<f32>) grid(1) block(1) {
  %s = kernel.smem f32[2,6]
  %v = kernel.load %x[0] : f32[2,4]
  kernel.store %v, %s[0, 4] {strides = [6, 1]}
  kernel.barrier
  %back = kernel.load %s[0, 0] : f32[1,2]
  kernel.store %back, %y[0]
}
func.func @forward(%x: f32[8]) -> f32[2] {
  %y = kernel.alloc : f32[2]
  kernel.launch @k_rows(%x, %y)
  func.return %y
}
"""
    with pytest.raises(IRForgeError, match="across a row"):
        run(parse_module(text), [np.ones(8, np.float32)])
