"""On a GPU: every corpus program compiled by `torch-to-cuda` runs and matches PyTorch eager (the code path of
`irforge run`), and `irforge run` itself answers as documented (skipped without a GPU)."""

from __future__ import annotations

import dataclasses
import io

import pytest
from test_corpus import PROGRAMS, captured

from irforge.pass_manager import run_pipeline
from irforge.runtime import has_gpu

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("name", [n for n, _ in PROGRAMS])
def test_corpus_program_runs_on_the_gpu_like_eager(name):
    from irforge.runner import check_on_gpu

    entry = dict(PROGRAMS)[name]
    prog = captured(name)
    module = prog.module.clone()
    run_pipeline(module, "torch-to-cuda")
    prog = dataclasses.replace(prog, module=module, level="cuda")
    for i, (_, c) in enumerate(check_on_gpu(prog)):
        tol = entry.get("tol")
        assert (c.max_rel <= tol and not c.note) if tol is not None else c.ok, f"output #{i}: {c}"


def test_irforge_run_reports_each_output_and_exits_0():
    from irforge.tools.cli import main

    out, err = io.StringIO(), io.StringIO()
    rc = main(["run", "-c", "nn.RMSNorm(2048)(torch.randn(1,32,2048))"], stdout=out, stderr=err)
    assert rc == 0, err.getvalue()
    assert out.getvalue().startswith("output #0: max abs error") and ": ok" in out.getvalue()


def test_irforge_run_bench_prints_one_table():
    from irforge.tools.cli import main

    out, err = io.StringIO(), io.StringIO()
    rc = main(
        ["run", "--bench", "--reps", "10", "-c", "torch.softmax(torch.randn(256,1024), -1)"], stdout=out, stderr=err
    )
    assert rc == 0, err.getvalue()
    table = [ln for ln in out.getvalue().splitlines() if ln.startswith("|")]
    assert "eager" in table[0] and "torch.compile" in table[0] and "irforge" in table[0] and len(table) == 3
