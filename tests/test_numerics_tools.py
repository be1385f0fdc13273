"""`irforge-opt --check-numerics` / `--bisect-numerics` and `irforge compile --bisect-numerics`: the reference
interpreters before and after a pipeline (or each pass), a difference or a race reported at its place.
`test-miscompile` stands for a pass with a bug (it shifts every float constant by 1)."""

from __future__ import annotations

import io

import pytest
from irforge.tools.cli import main as cli_main
from irforge.tools.opt import main as opt_main
from test_tile_dialect import RACY

LOOP = """func.func @f(%x: f32[4,8]) -> f32[4] {
  %y = loop.buffer f32[4]
  loop.kernel @k {
    loop.for %a in 0..4 {
      %s = loop.reduce %r in 0..8 add(0.0) -> f32 {
        %v = loop.load %x[%a, %r]
        %two = scalar.const 2.0 : f32
        %w = scalar.mul %v, %two : f32
        loop.yield %w
      }
      loop.store %y[%a] = %s
    }
  }
  func.return %y
}
"""


def opt(argv, text):
    out, err = io.StringIO(), io.StringIO()
    rc = opt_main(["-", *argv], stdin=io.StringIO(text), stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("flag", ["--check-numerics", "--bisect-numerics"])
@pytest.mark.parametrize("pipeline", ["loop-to-tile,tile-to-kernel", "loop-to-tile,tile-to-kernel,kernel-to-cuda"])
def test_a_correct_pipeline_passes(flag, pipeline):
    rc, out, err = opt(["-p", pipeline, flag], LOOP)
    if flag == "--check-numerics" and pipeline.endswith("kernel-to-cuda"):  # nothing to run the result with
        assert rc == 1 and "the cuda level has none" in err
        return
    assert rc == 0, err
    assert out.startswith(("kernel.func", "cuda."))


def test_check_numerics_reports_the_difference_at_the_output():
    rc, out, err = opt(["-p", "loop-to-tile,test-miscompile,tile-to-kernel", "--check-numerics"], LOOP)
    assert rc == 1 and out == ""
    assert err.startswith("<stdin>:14:3: error: the pipeline changes the answer: output #0 (f32[4])"), err
    assert "MISMATCH; --bisect-numerics names the first pass" in err


def test_bisect_numerics_names_the_first_pass_that_changes_the_answer():
    pipeline = "loop-to-tile,test-miscompile,tile-to-kernel"
    rc, _out, err = opt(["-p", pipeline, "--bisect-numerics"], LOOP)
    assert rc == 1
    lines = err.splitlines()
    # at the pass in the pipeline text (column 14), with the output it changed as a note
    assert lines[0].startswith("<pass-pipeline>:1:14: error: pass 'test-miscompile' changes the answer: output #0")
    assert lines[1:3] == [pipeline, " " * 13 + "^"]
    assert lines[3] == "<stdin>:14:3: note: the output"


def test_bisect_numerics_runs_the_simulator_at_the_kernel_level():
    combined = RACY.replace(
        "tile.store %y[%a0] = %p", "%s = tile.combine add(%p) over threadIdx.x : f32\n      tile.store %y[%a0] = %s"
    ).replace("add(0.0)", "add(1.0)")  # a float constant for test-miscompile to change, after the lowering
    rc, _out, err = opt(["-p", "tile-to-kernel", "--bisect-numerics"], combined)
    assert rc == 0, err
    rc, _out, err = opt(["-p", "tile-to-kernel,test-miscompile", "--bisect-numerics"], combined)
    assert rc == 1 and err.startswith("<pass-pipeline>:1:16: error: pass 'test-miscompile' changes the answer"), err


def test_a_race_in_the_input_is_reported_at_the_store():
    for flag in ("--check-numerics", "--bisect-numerics"):
        rc, _out, err = opt(["-p", "kernel(tile-blockify{threads=8})", flag], RACY)
        assert rc == 1
        assert err.startswith("<stdin>:9:7: error: stores a value that differs between thread"), err
        assert err.splitlines()[0].endswith("(in the pipeline's input IR)")


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    rc = cli_main(list(argv), stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def test_compile_bisect_numerics_checks_every_pass_against_eager():
    snippet = "torch.randn(4, 8).softmax(-1) * 2"
    rc, _out, err = cli("compile", "-c", snippet, "--ir", "kernel", "--bisect-numerics")
    assert rc == 0, err
    rc, _out, err = cli(
        "compile",
        "-c",
        snippet,
        "--pass-pipeline",
        "torch-to-tensor,test-miscompile,tensor-to-loop",
        "--bisect-numerics",
    )
    assert rc == 1
    assert err.startswith("<pass-pipeline>:1:17: error: pass 'test-miscompile' changes the answer: output #0"), err
    assert "against PyTorch eager on the program's inputs" in err
