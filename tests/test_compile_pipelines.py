"""Pipelines in `irforge compile`, `irforge run` and `irforge.compile`: the default lowering is the `torch-to-cuda`
named pipeline cut at a level; `--pass-pipeline` replaces it, `--after`/`--before` insert passes at named points;
IR files belong to irforge-opt (compile) or run as they are (run, cuda level)."""

from __future__ import annotations

import io

import pytest
import torch
from irforge.tools.cli import main

import irforge
from irforge.compiler import lowering
from irforge.diagnostics import IRForgeError
from irforge.dialect import LEVELS
from irforge.registry import registry

SNIPPET = "x = torch.randn(4, 32); torch.softmax(x, -1)"


def run(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def passes_run(err: str) -> list[str]:
    return [ln.split()[1].split("{")[0] for ln in err.splitlines() if ln.startswith("pass ")]


def test_each_level_is_the_lowering_cut_after_its_step():
    text = registry().pipelines()["torch-to-cuda"].text
    steps = [ln.strip().rstrip(",") for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    assert steps == ["torch-to-tensor", "tensor-to-loop", "loop-to-tile", "tile-to-kernel", "kernel-to-cuda"]
    assert lowering("torch") == []
    texts = {level: [sp.pass_.text() for sp in lowering(level)] for level in LEVELS}
    for prev, level, step in zip(LEVELS, LEVELS[1:], steps):
        last = lowering(level)[-1]
        assert step in last.within or last.pass_.name == step  # the level's own step ends it
        assert texts[level][: len(texts[prev])] == texts[prev] and len(texts[level]) > len(texts[prev])
    with pytest.raises(IRForgeError, match="unknown level 'gpu'"):
        lowering("gpu")


def test_after_and_before_insert_at_every_place_a_point_runs():
    rc, _, err = run("compile", "-c", SNIPPET, "--ir", "loop", "--after", "loop-fuse-reductions=loop-dce", "-v")
    names = passes_run(err)
    assert rc == 0
    # loop-fuse-reductions runs twice in tensor-to-loop: a loop-dce follows each run
    at = [i for i, n in enumerate(names) if n == "loop-fuse-reductions"]
    assert len(at) == 2 and all(names[i + 1] == "loop-dce" for i in at)
    rc, _, err = run("compile", "-c", SNIPPET, "--ir", "tile", "--before", "loop-to-tile=loop-cse,loop-dce", "-v")
    names = passes_run(err)
    # inserted before loop-to-tile, whose own first pass is loop-dce (then map-to-tile)
    at = names.index("map-to-tile")
    assert rc == 0 and names[at - 3 : at] == ["loop-cse", "loop-dce", "loop-dce"]
    rc, _, err = run("compile", "-c", SNIPPET, "--ir", "tile", "--after", "loop-to-tile=cse", "-v")
    assert rc == 0 and passes_run(err)[-1] == "cse" and passes_run(err)[-2] != "cse"


def test_pass_pipeline_replaces_the_lowering():
    rc, out, err = run("compile", "-c", SNIPPET, "--pass-pipeline", "torch-to-tensor,tensor-to-loop", "-v")
    assert rc == 0 and "loop.kernel" in out and "map-to-tile" not in err
    rc, out, _ = run("compile", "-c", SNIPPET, "--pass-pipeline", "torch-to-tensor,tensor-to-loop", "--check")
    assert rc == 0
    m = torch.nn.Softmax(dim=-1)
    prog = irforge.compile(m, torch.randn(4, 32), pipeline="torch-to-tensor,tensor-to-loop")
    assert prog.level == "loop" and all(c.ok for c in prog.check())
    prog = irforge.compile(m, torch.randn(4, 32), ir="loop", after={"tensor-to-loop": "loop-cse"})
    assert prog.level == "loop"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--ir", "tile", "--after", "loop-to-tiles=cse"],
            "--after loop-to-tiles: the lowering to the tile level runs no pass or pipeline 'loop-to-tiles'; did you "
            "mean 'loop-to-tile'?",
        ),
        (["--after", "loop-to-tile=cse"], "the lowering to the tensor level runs no pass or pipeline 'loop-to-tile'"),
        (["--after", "loop-to-tile"], "--after loop-to-tile: expected POINT=PIPE"),
        (["--ir", "loop", "--pass-pipeline", "cse"], "--ir stops the default lowering at a level"),
        (["--pass-pipeline", "cse", "--after", "cse=dce"], "--pass-pipeline replaces it: use one"),
        (["--pass-pipeline", "tensor-to-loop"], "pass 'lift-to-loop' reads tensor IR, but the IR is at the torch"),
        (
            ["--ir", "tile", "--after", "tensor-to-loop=map-to-tile"],
            "pass 'loop-dce' reads loop IR, but the IR is at the tile level after 'map-to-tile'",
        ),
        (["--ir", "loop", "--after", "tensor-to-loop=no-such-pass"], "unknown pass or pipeline 'no-such-pass'"),
    ],
)
def test_bad_pipelines_are_one_message(argv, message):
    rc, out, err = run("compile", "-c", SNIPPET, *argv)
    assert rc == 1 and message in err and "Traceback" not in err and out == ""


def test_ir_files_go_to_irforge_opt_or_run_as_they_are(tmp_path):
    loop_ir = tmp_path / "m.loop.ir"
    assert run("compile", "-c", SNIPPET, "--ir", "loop", "-o", str(loop_ir))[0] == 0
    rc, _, err = run("compile", str(loop_ir))
    assert rc == 1 and f"for textual IR use irforge-opt: irforge-opt {loop_ir} --pass-pipeline=PIPE" in err
    rc, _, err = run("run", str(loop_ir))
    assert (
        rc == 1 and f"{loop_ir}:1:1: error: irforge run takes cuda-level IR, and this file is at the loop level" in err
    )
    cuda_ir = tmp_path / "m.cuda.ir"
    assert run("compile", "-c", SNIPPET, "--ir", "cuda", "-o", str(cuda_ir))[0] == 0
    from irforge.runner import load_cuda_program

    prog = load_cuda_program(str(cuda_ir))  # random inputs and weights, no reference
    assert prog.level == "cuda" and [a.shape for a in prog.inputs] == [(4, 32)] and prog.expected == []
    rc, _, err = run("run", str(cuda_ir), "--bench")
    assert rc == 1 and "a .ir file runs as it is" in err
    rc, _, err = run("run", "-c", SNIPPET, "--model", "m.py")
    assert rc == 1 and "--model names the Python file a .ir file was compiled from" in err


def test_run_with_the_model_file_takes_its_weights_and_inputs(tmp_path):
    model = tmp_path / "m.py"
    model.write_text("import torch\nmodel = torch.nn.RMSNorm(32)\nexample_inputs = (torch.randn(4, 32),)\n")
    cuda_ir = tmp_path / "m.cuda.ir"
    assert run("compile", str(model), "--ir", "cuda", "-o", str(cuda_ir))[0] == 0
    from irforge.runner import load_cuda_program

    prog = load_cuda_program(str(cuda_ir), str(model))
    assert set(prog.params) == {"weight"} and len(prog.expected) == 1 and prog.inputs[0].shape == (4, 32)
