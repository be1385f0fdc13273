"""`irforge compile` and `irforge.compile`: inputs (snippets, files, modules), levels, verbosity, --check, and one
clear located message with exit status 1 for every unsupported input."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from irforge.tools.cli import main
from irforge.tools.opt import main as opt_main
from torch import nn

import irforge
from irforge.location import NameLoc

CORPUS = Path(__file__).parent / "corpus"
SEED = "x=torch.randn(16,64); bias=torch.randn(64); w=torch.randn(64,16); torch.relu(torch.matmul(x + bias, w))"


def run(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


# ---- compiling -------------------------------------------------------------------------------------------------
def test_levels():
    rc, torch_ir, _ = run("compile", "-c", SEED, "--ir", "torch")
    assert rc == 0 and "torch.aten.matmul(%add, %w) : f32[16,16]" in torch_ir
    rc, tensor_ir, _ = run("compile", "-c", SEED)  # tensor is the default level
    assert rc == 0 and "tensor.reduce add" in tensor_ir and "torch." not in tensor_ir


def test_output_file_reads_back_unchanged(tmp_path):
    path = tmp_path / "f.ir"
    rc, out, _ = run("compile", "-c", "nn.RMSNorm(2048)(torch.randn(1,32,2048))", "--ir", "tensor", "-o", str(path))
    assert rc == 0 and out == ""
    again = io.StringIO()
    assert opt_main([str(path)], stdout=again, stderr=io.StringIO()) == 0
    assert again.getvalue() == path.read_text()


def test_verbose_names_each_pass_and_very_verbose_diffs():
    rc, _, err = run("compile", "-c", "torch.exp(torch.randn(3))", "-v")
    lines = [ln.split()[1] for ln in err.splitlines() if ln.startswith("pass ")]
    assert rc == 0 and lines[0] == "decompose-params" and "torch-to-tensor-finalize" in lines and lines[-1] == "dce"
    rc, _, err = run("compile", "-c", "torch.exp(torch.randn(3))", "-vv")
    assert ">>> decompose-pointwise" in err and "+  %exp = tensor.elementwise exp %x : f32[3]" in err
    assert "<<< decompose-pointwise" in err


def test_check_reports_errors_and_passes():
    rc, _, err = run("compile", "-c", "nn.Softmax(dim=-1)(torch.randn(4,33))", "--check")
    assert rc == 0
    assert "check: output #0 (f32[4,33]) vs PyTorch eager: max abs error" in err and err.rstrip().endswith(": ok")


def test_check_fails_on_a_wrong_decomposition(monkeypatch):
    from irforge.passes.torch_to_tensor.silu import DecomposeSilu

    # silu lowered as sigmoid alone: the tensor level no longer computes what PyTorch does
    wrong = {"aten.silu": lambda op, b: b.ew("sigmoid", op.arg(0, "self"))}
    monkeypatch.setattr(DecomposeSilu, "handlers", wrong)
    rc, _, err = run("compile", "-c", "F.silu(torch.randn(3, 5))", "--check")
    assert rc == 1 and "MISMATCH" in err and "does not match PyTorch eager" in err


def test_torch_level_check():
    rc, _, err = run("compile", "-c", SEED, "--ir", "torch", "--check")
    assert rc == 0 and "max abs error 0," in err


def test_debuginfo_locates_ops_at_the_snippet():
    rc, out, _ = run("compile", "-c", "x = torch.randn(2, 8)\nnn.RMSNorm(8)(x) * 2", "--print-debuginfo")
    assert rc == 0
    assert 'loc("aten.rms_norm"("<snippet>":2:1))' in out  # decomposed ops remember the ATen op and user line
    assert 'loc("aten.mul.Tensor"("<snippet>":2:1))' in out


def test_file_input():
    rc, out, err = run("compile", str(CORPUS / "manual_attention.py"), "--check")
    assert rc == 0, err
    assert "func.func @forward(%x: f32[2,7,24])" in out and "@qkv.weight" in out


def test_python_api_module_and_function():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    x = torch.randn(3, 8)
    prog = irforge.compile(model, x)
    assert prog.level == "tensor" and set(prog.params) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert "tensor.gather" not in str(prog) and "tensor.reduce add" in str(prog)
    (y,) = prog()
    np.testing.assert_allclose(y, model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    (y2,) = prog(np.ones((3, 8), np.float32))  # other inputs, same params
    np.testing.assert_allclose(y2, model(torch.ones(3, 8)).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert all(c.ok for c in prog.check())

    fn = irforge.compile(lambda a, b: torch.softmax(a @ b, -1), torch.randn(2, 3), torch.randn(3, 4), ir="torch")
    assert fn.input_names == ["a", "b"] and "torch.aten.softmax.int" in str(fn)


def test_decomposed_ops_keep_the_torch_location():
    prog = irforge.compile(nn.LayerNorm(4), torch.randn(2, 4))
    locs = {op.loc for op in prog.module.walk() if op.name.startswith("tensor.") and op.name != "tensor.param"}
    assert locs and all(isinstance(loc, NameLoc) and loc.name == "aten.layer_norm" for loc in locs)
    # nn.LayerNorm's own code is PyTorch's: the user's line is the one that compiled it
    assert {loc.file_line_col().file for loc in locs} == {__file__}


# ---- unsupported input: one located message, exit 1, no traceback ------------------------------------------------
@pytest.mark.parametrize(
    "snippet, message, line_col",
    [
        ("x=torch.randn(4,5)\ntorch.logcumsumexp(x, dim=1)", "unsupported torch op 'aten.logcumsumexp'", (2, 1)),
        ("x=torch.randn(8); torch.nonzero(x)", "depends on the data", (1, 19)),
        ("x=torch.randn(8); x[x > 0] * 2", "depends on the data", (1, 19)),
        ("torch.relu(torch.randn(3)", "the snippet does not parse", (1, 11)),
        ("x = torch.randn(3)", "the snippet must end with an expression", (1, 1)),
        (
            "x=torch.randn(3); x.sum().item()",
            "must return a tensor (or tuples of tensors), but it returns float",
            (1, 19),
        ),
        ("x=torch.randn(3); x + undefined_name", "raised NameError: name 'undefined_name' is not defined", (1, 23)),
        ("x=torch.randn(3); F.dropout(x, 0.5, training=True)", "draws random numbers", (1, 19)),
        ("x=torch.randn(2,3,8,8); nn.Conv2d(3,4,3)(x)", "unsupported torch op 'aten.convolution'", (1, 25)),
        ("1 + 2", "computes nothing from tensors", (1, 1)),
    ],
)
def test_unsupported_snippets(snippet, message, line_col):
    rc, out, err = run("compile", "-c", snippet)
    assert rc == 1 and out == ""
    first = err.splitlines()[0]
    assert first.startswith(f"<snippet>:{line_col[0]}:{line_col[1]}: error: "), err
    assert message in first
    assert "Traceback" not in err
    src_line = snippet.splitlines()[line_col[0] - 1]
    assert err.splitlines()[1] == src_line and err.splitlines()[2] == " " * (line_col[1] - 1) + "^"


def test_unsupported_dtype_is_named():
    rc, _, err = run("compile", "-c", "torch.randn(3, dtype=torch.complex64) * 2")
    assert rc == 1 and "unsupported dtype complex64" in err and "Traceback" not in err


def test_bad_files(tmp_path):
    rc, _, err = run("compile", str(tmp_path / "missing.py"))
    assert rc == 1 and "cannot read" in err
    empty = tmp_path / "empty.py"
    empty.write_text("import torch\n")
    rc, _, err = run("compile", str(empty))
    assert rc == 1 and "must define model and example_inputs" in err
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\nmodel = (\n")
    rc, _, err = run("compile", str(broken))
    assert rc == 1 and f"{broken}:2:" in err and "does not parse" in err
    raising = tmp_path / "raising.py"
    raising.write_text("import torch\n\ndef model(x):\n    return x @ x\n\nexample_inputs = torch.randn(2, 3)\n")
    rc, _, err = run("compile", str(raising))
    assert rc == 1 and f"{raising}:4:12: error: the program raised RuntimeError" in err and "Traceback" not in err


def test_tools_do_not_import_torch():
    # below the torch level (whose verifier asks the installed PyTorch what each ATen call gives)
    code = (
        "import io, sys\n"
        "from irforge.tools.opt import main\n"
        "main(['--list-passes'], stdout=io.StringIO())\n"
        "main(['tests/lit/tensor-fold-constants/fold.ir', '-p', 'tensor-to-loop'], stdout=io.StringIO())\n"
        "from irforge.tools.cli import main as cli\n"
        "try:\n    cli(['compile', '--help'], stdout=io.StringIO())\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parent.parent
    )
    assert proc.returncode == 0, proc.stderr


# ---- odd programs: each is a located error or works; nothing else on stderr ----------------------------------
def test_file_encoding_is_python_s(tmp_path):
    latin1 = tmp_path / "latin1.py"
    body = b"import torch\n# caf\xe9\nmodel = torch.nn.Softmax(-1)\nexample_inputs = torch.randn(2, 4)\n"
    latin1.write_bytes(body)
    rc, out, err = run("compile", str(latin1))
    assert rc == 1 and out == ""
    assert err.startswith(f"{latin1}:2:6: error: input is not UTF-8 text (byte 0xe9)\n"), err
    latin1.write_bytes(b"# -*- coding: latin-1 -*-\n" + body)  # PEP 263: as Python reads it
    rc, out, err = run("compile", str(latin1))
    assert rc == 0 and "tensor.reduce max" in out, err


@pytest.mark.parametrize(
    ("snippet", "message", "line_col"),
    [
        ("import sys; sys.exit(0)\ntorch.randn(3)", "the program exits (sys.exit(0))", (1, 13)),
        ("torch.linalg.inv(torch.randn(3, 3))", "'aten._linalg_check_errors' has a side effect", (1, 1)),
        ("x = torch.randn(5); x[:int(x.sum() > 0) + 1]", "depends on the data", (1, 24)),
    ],
    ids=["sys-exit", "side-effect", "data-dependent-shape"],
)
def test_odd_programs_are_one_located_error(snippet, message, line_col):
    rc, out, err = run("compile", "-c", snippet)
    assert rc == 1 and out == ""
    lines = err.splitlines()
    assert len(lines) == 3, err  # the message, the source line, the caret: no log or graph printed around them
    assert lines[0].startswith(f"<snippet>:{line_col[0]}:{line_col[1]}: error: ") and message in lines[0], err


def test_converted_modules_are_part_of_the_program():
    rc, out, err = run("compile", "-c", "nn.RMSNorm(64).half()(torch.randn(3, 64).half())", "--check")
    assert rc == 0, err
    assert "tensor.param @rms_norm.weight : f16[64]" in out  # converted before capture, so a param of the program
    assert err.endswith(": ok\n")
