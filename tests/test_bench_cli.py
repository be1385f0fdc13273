"""`irforge bench` without a GPU: --list, the no-GPU refusal, bad arguments, --compile-only and its cache, --merge
and --compare on results files."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
import torch
from irforge.tools.cli import main

from irforge.bench import report
from irforge.bench.case import Case, Input
from irforge.bench.compile_cache import CompileCache, compile_case, irforge_system
from irforge.bench.harness import CaseError
from irforge.runtime import has_gpu

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from test_bench_harness import FakeTimer
from test_bench_report import CEILINGS, sample
from test_bench_suites import LLM_IDS


def bench(*argv):
    out, err = io.StringIO(), io.StringIO()
    rc = main(["bench", *argv], stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def listed_ids(text: str) -> list[str]:
    lines = text.splitlines()
    assert lines[0].split()[:2] == ["id", "family"]
    return [ln.split()[0] for ln in lines[1:]]


def test_list_seed84_prints_84_rows_with_bytes_and_flops():
    rc, out, _ = bench("--suite", "seed84", "--list")
    assert rc == 0
    ids = listed_ids(out)
    assert len(ids) == 84 and len(set(ids)) == 84
    assert {"matmul.TL.q.s128", "matmul_add.QW.down.s512", "naive_attn.TL.s32"} <= set(ids)
    row = next(ln for ln in out.splitlines() if ln.startswith("matmul.TL.q.s128 "))
    assert row.split()[-2:] == ["18.874", "1.074"]  # MB, GFLOP


def test_list_llm_prints_its_ids():
    rc, out, _ = bench("--suite", "llm", "--list")
    assert rc == 0 and listed_ids(out) == LLM_IDS


def test_list_takes_case_globs():
    rc, out, _ = bench("--suite", "llm", "--list", "--cases", "F?,D1")
    assert rc == 0 and listed_ids(out) == ["F1", "F2", "F3", "F4", "F5", "F6", "D1"]


@pytest.mark.skipif(has_gpu(), reason="checks the refusal on a machine without a GPU")
def test_without_a_gpu_bench_says_so_in_one_line():
    rc, out, err = bench("--suite", "seed84", "--cases", "softmax.*")
    assert rc == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("irforge bench: no CUDA GPU is visible here")


def test_startup_does_not_import_torch():
    code = (
        "import sys\nfrom irforge.tools.cli import _arg_parser\n"
        "_arg_parser().format_help()\nprint('torch' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "False", proc.stderr


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--list"], "say which suite with --suite"),
        (["--suite", "seed84", "--systems", "eager,tvm"], "unknown system 'tvm'"),
        (["--suite", "seed84", "--systems", "irforge"], "--systems must keep eager"),
        (["--suite", "seed84", "--variant", "oops"], "--variant takes NAME=PIPELINE"),
        (["--suite", "seed84", "--pipeline", "torch-to-cuda,no-such-pass"], "no-such-pass"),
        (["--suite", "seed84", "--compile-only"], "give it --cache DIR"),
        (["--suite", "seed84", "--compile-only", "--cache", "c", "--jobs", "0"], "--jobs 0: give at least 1"),
        (["--suite", "seed84", "--cases", "zzz*", "--list"], "no case matches 'zzz*'"),
    ],
)
def test_bad_arguments_get_one_clear_message(argv, message):
    rc, _, err = bench(*argv)
    assert rc == 1 and message in err and "Traceback" not in err


def test_compile_only_writes_programs_that_parse_back_and_cubins(tmp_path):
    from irforge.parser import parse_module

    rc, out, err = bench(
        "--suite", "seed84", "--cases", "softmax.TL.s32,silu_mul.TL.s32", "--compile-only", "--cache", str(tmp_path),
        "--jobs", "2",
    )  # fmt: skip
    assert rc == 0, err
    assert "compiled 2 cases x 1 pipeline(s) for sm_90a" in out and "0 failed" in out
    entries = sorted((tmp_path / "programs").rglob("*.json"))
    assert [e.parent.name for e in entries] == ["silu_mul.TL.s32", "softmax.TL.s32"]
    for e in entries:
        data = json.loads(e.read_text())
        assert data["status"] == "ok" and data["key"]["pipeline"] == "torch-to-cuda" and data["key"]["arch"] == "sm_90a"
        module = parse_module(e.with_suffix(".ir").read_text())
        assert any(op.name == "cuda.kernel" for op in module.body.ops)
    assert len(list((tmp_path / "cubin").glob("*.cubin"))) == 2


def _unsupported_case() -> Case:
    # logcumsumexp has no decomposition: its compile fails with a located error
    return Case("t.lcse", "scan", (Input("x", (4, 8), torch.float32),), 0, fn=lambda x: torch.logcumsumexp(x, -1))


def test_a_failed_compile_is_cached_as_an_error_row(tmp_path, monkeypatch):
    import irforge.runtime.nvrtc as nvrtc

    cache = CompileCache(tmp_path)
    case = _unsupported_case()
    compiled = compile_case(case, "torch-to-cuda", "sm_90a")
    assert compiled.error and compiled.text is None
    cache.store(case, "torch-to-cuda", "sm_90a", compiled)
    assert cache.load(case, "torch-to-cuda", "sm_90a").error == compiled.error
    # the irforge system (on an sm_90a device) reports the stored error without compiling again
    monkeypatch.setattr(nvrtc, "default_arch", lambda: "sm_90a")
    system = irforge_system("irforge", "torch-to-cuda", cache)
    with pytest.raises(CaseError) as e:
        system.build(case, case.program("cpu"))
    assert str(e.value) == compiled.error and cache.hits == 2 and cache.misses == []


def test_cache_misses_say_what_differs(tmp_path, monkeypatch):
    from irforge.bench import compile_cache

    cache = CompileCache(tmp_path)
    case = _unsupported_case()
    cache.store(case, "torch-to-cuda", "sm_90a", compile_case(case, "torch-to-cuda", "sm_90a"))
    assert cache.load(case, "torch-to-tensor,tensor-to-loop", "sm_90a") is None
    assert cache.load(case, "torch-to-cuda", "sm_80") is None
    monkeypatch.setattr(compile_cache, "source_hash", lambda: "another tree")
    assert cache.load(case, "torch-to-cuda", "sm_90a") is None
    assert cache.misses == [
        "t.lcse: not in the cache",
        "t.lcse: the cache's arch differs",
        "t.lcse: the cache's source differs",
    ]


def test_merge_and_compare_on_results_files(tmp_path):
    a, b = sample(), sample(irforge_ms=(0.5, 4.0, 1.0))
    (tmp_path / "a").mkdir()
    pa = report.write(a, tmp_path / "a", chart=False)[0]
    b["rows"] = b["rows"][:2]
    pb = report.write(b, tmp_path / "b", chart=False)[0]
    rc, out, err = bench("--compare", str(pa), str(pb))
    assert rc == 0 and "| mm.a | irforge | 1000.0 | 500.0 | 2.00x |" in out and "in one run only: dl.a" in out
    rc, out, err = bench("--merge", str(pa), str(pb), "-o", str(tmp_path / "m"))
    assert rc == 0 and "keeping the later one" in err
    merged = report.load(tmp_path / "m" / "demo.json")
    assert len(merged["runs"]) == 2 and len(merged["rows"]) == 6
    assert (tmp_path / "m" / "demo.md").exists()
    rc, out, err = bench("--compare", str(pa), str(tmp_path / "m" / "demo.md"))
    assert rc == 1 and "is not JSON" in err


class _FakeCudaTimer:
    """Stands in for CudaTimer on a machine without a GPU."""

    def __new__(cls, host_ahead=True):
        timer = FakeTimer({"eager": [1.0], "irforge": [2.0]})
        timer.description = lambda: "a fake clock"
        return timer


def test_a_run_writes_after_each_case_and_resumes(tmp_path, monkeypatch):
    """The whole `irforge bench` run on the CPU with a fake clock: eager is timed, irforge (which needs a GPU to
    run its kernels) is an error row, the report says torch.compile was left out, --resume runs the cases left."""
    import functools

    from irforge.bench import command, harness

    # Only the command's gate is opened: the executor still finds no GPU, which makes irforge's rows errors.
    monkeypatch.setattr(command, "_gpu_ready", lambda: True)
    monkeypatch.setattr(harness, "CudaTimer", _FakeCudaTimer)
    monkeypatch.setattr(harness, "measure_ceilings", lambda timer: CEILINGS)
    monkeypatch.setattr(harness, "Settings", functools.partial(harness.Settings, device="cpu"))
    written = []
    real_write = report.write
    monkeypatch.setattr(
        report, "write", lambda rep, *a, **k: written.append(len(rep["rows"])) or real_write(rep, *a, **k)
    )
    no_gpu = "the GPU executor needs a CUDA GPU and a torch build with CUDA"
    out_dir = tmp_path / "out"
    args = ["--suite", "seed84", "--systems", "eager,irforge", "--cache", str(tmp_path / "cache"), "-o", str(out_dir)]
    rc, out, err = bench(*args, "--cases", "softmax.TL.s32,rmsnorm.TL.s32", "--reps", "5")
    assert rc == 0, err
    assert written == [1, 2, 2]  # after each case, then the final report
    data = report.load(out_dir / "seed84.json")
    assert [r["id"] for r in data["rows"]] == ["rmsnorm.TL.s32", "softmax.TL.s32"]
    for r in data["rows"]:
        assert r["systems"]["eager"]["status"] == "ok" and r["systems"]["eager"]["reps"] == 5
        assert r["systems"]["irforge"] == {"status": "error", "detail": "error: " + no_gpu}
    assert data["runs"][0]["settings"]["left_out"] == ["torch.compile"]
    assert "left out: torch.compile" in (out_dir / "seed84.md").read_text()
    assert "irforge**: 2 error (of 2 cases)" in out
    rc, out, err = bench(*args, "--cases", "softmax.TL.s32,rmsnorm.TL.s32,silu_mul.TL.s32", "--resume")
    data = report.load(out_dir / "seed84.json")
    assert rc == 0 and [r["id"] for r in data["rows"]] == ["rmsnorm.TL.s32", "softmax.TL.s32", "silu_mul.TL.s32"]
    assert [r["run"] for r in data["rows"]] == [0, 0, 1] and len(data["runs"]) == 2


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("stream", [io.StringIO, _Terminal])
def test_progress_shows_case_count_and_eta(stream):
    from irforge.bench.command import Progress

    s = stream()
    progress = Progress(2, s, verb="timing")
    progress.start(0, Case("R1", "rmsnorm", (), 0))
    row = {"id": "R1", "systems": {"eager": {"median_ms": 0.0123, "reps": 100}, "irforge": {"status": "wrong"}}}
    progress.done(row, [row])
    progress.close()
    text = s.getvalue()
    assert "R1: eager 12.3 us [100 runs] | irforge wrong" in text
    if stream is io.StringIO:  # plain lines: the count and the times on each
        assert text.startswith("[1/2] R1: ") and "elapsed, ETA" in text
    else:  # rich's bar
        assert "1/2" in text and "ETA" in text


def test_the_irforge_system_binds_a_layer_s_weights_by_name(tmp_path, monkeypatch):
    """A decoder-layer case stored in the cache (weights not stored) gets every param its program reads from the
    module made on the run's device: the capture's names are the module's. (The stored program is the captured
    one: the binding does not depend on how far the passes lower it.)"""
    pytest.importorskip("transformers")
    from dataclasses import replace

    from irforge.dialects.torch.capture import capture

    import irforge.runtime.executor as executor
    import irforge.runtime.nvrtc as nvrtc
    from irforge.bench import models
    from irforge.bench.compile_cache import Compiled
    from irforge.printer import print_module

    tiny = replace(models.TINYLLAMA, hidden=64, intermediate=128, heads=4, kv_heads=2, head_dim=16)
    inputs = (
        Input("hidden", (1, 8, 64), torch.bfloat16),
        Input("cos", (1, 8, 16), torch.bfloat16),
        Input("sin", (1, 8, 16), torch.bfloat16),
    )
    case = Case("t.layer", "decoder_layer", inputs, 0, module=lambda: models.decoder_layer(tiny).to(torch.bfloat16))
    captured = capture(case.program("cpu", init=False), case.empty_inputs("cpu"), [i.name for i in inputs])
    cache = CompileCache(tmp_path)
    cache.store(case, "torch-to-cuda", "sm_90a", Compiled(print_module(captured.module)))
    bound = {}

    class FakeExecutor:
        def __init__(self, module, params):
            bound.update(params)

    monkeypatch.setattr(executor, "Executor", FakeExecutor)
    monkeypatch.setattr(nvrtc, "default_arch", lambda: "sm_90a")
    program = case.program("cpu")
    irforge_system("irforge", "torch-to-cuda", cache).build(case, program)
    weights = dict(program.named_parameters())
    assert cache.hits == 1 and set(bound) == set(weights) and len(bound) == 9
    assert all(bound[k] is weights[k] for k in bound)
