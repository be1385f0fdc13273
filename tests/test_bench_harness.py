"""The benchmark harness's CPU-side parts: result checks, the markdown table, the PNG chart."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import harness


def test_compare_checks_values_shapes_and_nans():
    torch = pytest.importorskip("torch")
    ref = torch.randn(64, 64)
    assert harness.compare(ref + 1e-7, ref, None)[0]
    ok, err, why = harness.compare(ref * 1.01, ref, None)
    assert not ok and err == pytest.approx(0.01, rel=1e-3) and "over 1e-04" in why
    assert harness.compare((ref * 1.01).bfloat16(), ref.bfloat16(), None)[0]  # halves get 2e-2
    assert "shape" in harness.compare(ref[:2], ref, None)[2]
    nan = ref.clone()
    nan[3, 3] = float("nan")
    assert harness.compare(nan, ref, None)[2] == "NaN in output"


def _report():
    r = harness.Report(
        {"gpu": "H100", "torch": "2.x", "date": "today", "irforge git revision": "abc"},
        {"copy_bytes_per_s": 3.0e12, "bf16_matmul_flop_per_s": 7.0e14},
    )
    sys_ = {
        "eager": {"median_ms": 0.10, "pct_copy_bw": 40.0},
        "torch.compile": {"median_ms": 0.08, "pct_copy_bw": 50.0, "speedup_vs_eager": 1.25},
        "irforge": {"median_ms": 0.05, "pct_copy_bw": 80.0, "speedup_vs_eager": 2.0, "speedup_vs_torch.compile": 1.6},
    }
    r.rows = [
        {"id": "softmax f32", "bytes": 12e6, "floor_us": 4.0, "systems": sys_},
        {
            "id": "silu bf16",
            "bytes": 6e6,
            "floor_us": 2.0,
            "systems": {
                "eager": {"median_ms": 0.1, "pct_copy_bw": 20.0},
                "irforge": {"status": "WRONG: relative error 1e-01 over 2e-02"},
            },
        },
    ]
    return r


def test_markdown_table():
    md = harness.markdown(_report())
    assert "| softmax f32 | 12.0 | 4.0 | 100.0 (40%) | 80.0 (50%) | 50.0 (80%) | 1.25x | 2.00x | 1.60x |" in md
    assert "WRONG: relative error" in md
    assert "irforge vs eager: geomean 2.00x over 1 cases, 1 at >= 1x, worst 2.00x (softmax f32)" in md


def test_png_chart_without_matplotlib(tmp_path):
    path = tmp_path / "c.png"
    harness._raster_chart(_report().rows, ["eager", "torch.compile", "irforge"], path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 600 and height > 50
