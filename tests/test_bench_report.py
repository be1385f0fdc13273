"""Bench reports from hand-made results: ratios, % of the ceilings, geomeans, worst-first order, the JSON schema,
the markdown, merging partial runs, comparing two runs, the chart."""

from __future__ import annotations

import json
import math
import struct

import pytest

from irforge.bench import report
from irforge.diagnostics import IRForgeError

CEILINGS = {"copy_bytes_per_s": 2e12, "f32_matmul_flop_per_s": 5e13, "bf16_matmul_flop_per_s": 8e14}
SETTINGS = {
    "systems": ["eager", "irforge"],
    "left_out": ["torch.compile"],
    "reps": 100,
    "max_seconds_per_case": 3.0,
    "timing": "CUDA events",
}
ENV = {"gpu": "H100", "torch": "2.11", "date": "2026-11-24", "irforge revision": "abc1234"}


def timed(ms, reps=100):
    return {"status": "ok", "median_ms": ms, "reps": reps}


def row(cid, family, eager_ms, irforge, nbytes=2_000_000, flops=0, dtype="f32"):
    return {
        "id": cid,
        "family": family,
        "shapes": "x[1] f32",
        "dtype": dtype,
        "bytes": nbytes,
        "flops": flops,
        "systems": {"eager": timed(eager_ms), "irforge": irforge},
    }


def sample(irforge_ms=(1.0, 4.0, 0.5)):
    a, b, c = irforge_ms
    rows = [
        row("mm.a", "matmul", 2.0, timed(a), flops=10**11),  # 2x
        row("mm.b", "matmul", 2.0, timed(b, reps=12)),  # 0.5x, fewer runs
        row("sm.a", "softmax", 1.0, timed(c)),  # 2x
        row("sm.b", "softmax", 1.0, {"status": "wrong", "detail": "relative error 3e-01 over 1e-04"}),
        row("sm.c", "softmax", 1.0, {"status": "error", "detail": "error: cannot"}),
        row("dl.a", "layer", 1.0, {"status": "skipped", "detail": "skipped: needs transformers"}),
    ]
    return report.new_report("demo", ENV, SETTINGS, CEILINGS, rows)


def test_derived_ratios_and_percent_of_the_bound():
    rep = sample()
    rows = {r["id"]: r for r in rep["rows"]}
    mm = rows["mm.a"]
    # 1e11 FLOP at 5e13 FLOP/s = 2 ms > 2 MB at 2e12 B/s = 1 us: compute-bound, floor 2000 us
    assert mm["bound"] == "compute" and mm["floor_us"] == pytest.approx(2000.0)
    assert mm["systems"]["irforge"]["speedup_vs_eager"] == pytest.approx(2.0)
    assert mm["systems"]["irforge"]["pct_matmul_rate"] == pytest.approx(200.0)  # 1 ms against a 2 ms floor
    sm = rows["sm.a"]
    assert sm["bound"] == "memory" and sm["floor_us"] == pytest.approx(1.0)
    assert sm["systems"]["irforge"]["pct_copy_bw"] == pytest.approx(0.2)  # 1 us floor in 0.5 ms
    assert "speedup_vs_eager" not in rows["sm.b"]["systems"]["irforge"]


def test_each_half_type_is_held_to_its_own_matmul_rate():
    """A linear in f16 is measured against the f16 matmul rate of the run, its bf16 twin against bf16's."""
    ceilings = {**CEILINGS, "f16_matmul_flop_per_s": 4e14}
    rows = [
        row(f"L1{s}", "linear", 2.0, timed(1.0), flops=8 * 10**11, dtype=d) for d, s in (("bf16", ""), ("f16", ".f16"))
    ]
    rep = report.new_report("demo", ENV, SETTINGS, ceilings, rows)
    bf16, f16 = rep["rows"]
    assert bf16["floor_us"] == pytest.approx(1000.0) and f16["floor_us"] == pytest.approx(2000.0)
    assert f16["systems"]["irforge"]["pct_matmul_rate"] == pytest.approx(200.0)
    assert "f16 matmul 400 TFLOP/s" in report.markdown(rep)


def test_summary_geomean_counts_worst_and_families():
    s = sample()["summary"]["irforge"]
    v = s["vs eager"]
    assert v["geomean"] == pytest.approx((2.0 * 0.5 * 2.0) ** (1 / 3))
    assert v["cases"] == 3 and v["at_least_1x"] == 2
    assert v["worst"] == {"id": "mm.b", "ratio": pytest.approx(0.5)}
    assert v["families"]["matmul"]["geomean"] == pytest.approx(1.0)
    assert v["families"]["softmax"] == {"geomean": pytest.approx(2.0), "cases": 1, "at_least_1x": 1}
    assert s["status"] == {"ok": 3, "wrong": 1, "error": 1, "skipped": 1}
    assert "vs torch.compile" not in s


def test_worst_first_order():
    order = [r["id"] for r in report.worst_first(sample())]
    # wrong, error, then by speedup (ties keep the suite's order), then what says nothing about irforge
    assert order == ["sm.b", "sm.c", "mm.b", "mm.a", "sm.a", "dl.a"]


def test_json_schema_round_trip(tmp_path):
    paths = report.write(sample(), tmp_path, chart=False)
    data = report.load(paths[0])
    assert data["schema"] == report.SCHEMA and data["suite"] == "demo"
    assert set(data) == {"schema", "suite", "runs", "rows", "summary"}
    assert set(data["runs"][0]) == {"environment", "settings", "ceilings"}
    for r in data["rows"]:
        assert {"id", "family", "shapes", "dtype", "bytes", "flops", "bound", "floor_us", "run", "systems"} <= set(r)
        for e in r["systems"].values():
            assert e["status"] in {"ok", "wrong", "error", "skipped", "not run"}
            assert ("median_ms" in e) == (e["status"] == "ok")
    bad = tmp_path / "other.json"
    bad.write_text(json.dumps({"rows": []}))
    with pytest.raises(IRForgeError, match="not an irforge bench results file"):
        report.load(bad)


def test_markdown_table_and_summary_lines():
    md = report.markdown(sample())
    assert "left out: torch.compile" in md
    assert "vs eager: geomean **1.26x** over 3 cases, 2 at >= 1x, worst 0.50x (mm.b), best 2.00x (mm.a)" in md
    table = [ln for ln in md.splitlines() if ln.startswith("| ")]
    assert table[0].startswith("| case | shapes | MB | GFLOP | floor µs | eager µs (% of bound) | irforge µs")
    assert [ln.split(" | ")[0][2:] for ln in table[1:]][:3] == ["sm.b", "sm.c", "mm.b"]
    mm_b = next(ln for ln in table if ln.startswith("| mm.b "))
    assert "4000.0 (0%) [12 runs]" in mm_b and "| 0.50x |" in mm_b
    assert "**wrong**: relative error 3e-01 over 1e-04" in md


def test_readme_row():
    row = report.readme_row(sample(), "bench/results/demo.md")
    cells = "demo | H100 | abc1234 | 1.26x | left out | 2 of 6 | mm.b (0.50x) | [demo.md](bench/results/demo.md)"
    assert row == f"| {cells} |"


def test_merge_keeps_measured_rows_and_offsets_runs():
    first = sample()
    for r in first["rows"]:
        if r["id"] == "sm.a":
            r["systems"]["irforge"] = {"status": "not run", "detail": "device failed"}
    second = report.new_report(
        "demo", dict(ENV, gpu="H200"), SETTINGS, CEILINGS, [row("sm.a", "softmax", 1.0, timed(0.25))]
    )
    merged, notes = report.merge([first, second], ["mm.a", "mm.b", "sm.a", "sm.b", "sm.c", "dl.a"])
    assert [r["id"] for r in merged["rows"]] == ["mm.a", "mm.b", "sm.a", "sm.b", "sm.c", "dl.a"]
    sm_a = next(r for r in merged["rows"] if r["id"] == "sm.a")
    assert sm_a["run"] == 1 and sm_a["systems"]["irforge"]["speedup_vs_eager"] == pytest.approx(4.0)
    assert len(merged["runs"]) == 2 and notes == []
    _, notes = report.merge([merged, second])
    assert notes == ["sm.a: measured in more than one run; keeping the later one"]
    with pytest.raises(IRForgeError, match="different suites"):
        report.merge([first, dict(second, suite="other")])


def test_compare_reports_per_case_change():
    a, b = sample(), sample(irforge_ms=(0.5, 4.0, 1.0))
    text = report.compare(a, b, "a.json", "b.json")
    lines = text.splitlines()
    table = [ln for ln in lines if ln.startswith("| ") and not ln.startswith("| case")]
    assert table[0] == "| sm.a | irforge | 500.0 | 1000.0 | 0.50x |"  # largest slowdown first
    assert "| mm.a | irforge | 1000.0 | 500.0 | 2.00x |" in table
    geomean = math.prod([2.0, 1.0, 0.5]) ** (1 / 3)
    assert (
        f"- irforge: geomean speedup B over A {geomean:.2f}x over 3 cases; 1 faster and 1 slower by more than 5%"
        in lines
    )
    b["rows"][3]["systems"]["irforge"] = timed(1.0)
    assert "- sm.b irforge: wrong -> ok" in report.compare(a, b)


def test_png_chart(tmp_path):
    pytest.importorskip("matplotlib")
    from irforge.bench import chart

    path = chart.ratio_chart(sample(), tmp_path / "c.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 600 and height > 300
