"""The CLI at the GPU levels, without a GPU: `compile --ir tile|kernel|cuda` (and `--check` through the tile
interpreter and the kernel simulator), `irforge run` saying in one line that there is no GPU."""

from __future__ import annotations

import io

import pytest
from irforge.tools.cli import main

SEED = "nn.RMSNorm(2048)(torch.randn(1,32,2048))"


def _cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("level", "first"), [("tile", "func.func"), ("kernel", "kernel.func"), ("cuda", "cuda.kernel")]
)
def test_compile_prints_every_gpu_level(level, first):
    rc, out, err = _cli("compile", "-c", SEED, "--ir", level)
    assert rc == 0, err
    assert out.startswith(first)


@pytest.mark.parametrize("level", ["tile", "kernel"])
def test_compile_check_runs_the_levels_interpreter(level):
    rc, _, err = _cli("compile", "-c", "torch.softmax(torch.randn(6,300), -1)", "--ir", level, "--check")
    assert rc == 0, err
    assert err.startswith("check: output #0 (f32[6,300]) vs PyTorch eager: max abs error") and err.endswith(": ok\n")


def test_compile_check_at_the_cuda_level_points_to_run():
    rc, out, err = _cli("compile", "-c", SEED, "--ir", "cuda", "--check")
    assert rc == 1 and out == ""
    assert err.count("\n") == 1 and "use `irforge run`" in err


def test_run_without_a_gpu_says_so_in_one_line(monkeypatch):
    import irforge.runtime.driver as driver

    monkeypatch.setattr(driver, "has_gpu", lambda: False)
    rc, out, err = _cli("run", "-c", SEED)
    assert rc == 1 and out == ""
    assert err == "irforge run: no CUDA GPU is visible here (irforge.runtime.has_gpu() is false)\n"


def test_run_reports_user_mistakes_without_a_traceback(monkeypatch):
    import irforge.runtime.driver as driver

    monkeypatch.setattr(driver, "has_gpu", lambda: True)
    rc, _, err = _cli("run", "-c", "torch.randn(3) @@ torch.randn(3)")
    assert rc == 1 and "Traceback" not in err and "error" in err
