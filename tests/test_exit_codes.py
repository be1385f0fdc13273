"""Exit codes of `irforge` and `irforge-opt`: 0 success, 1 a user's mistake (a located message), 2 an internal
error (one line saying it is a bug, with a reproducer written), 130 on Ctrl-C without a traceback."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from irforge.tools.cli import main as cli_main
from irforge.tools.opt import main as opt_main

import irforge.compiler

LOOP = "func.func @f() {\n  test.loop %i in 0..4 {\n    test.yield\n  }\n  func.return\n}\n"
_BUG = re.compile(r"^(irforge|irforge-opt): internal error .* this is a bug in irforge; .* written to (\S+) ")


def opt(argv, stdin_text=""):
    out, err = io.StringIO(), io.StringIO()
    stdin = stdin_text if not isinstance(stdin_text, str) else io.StringIO(stdin_text)
    rc = opt_main(argv, stdin=stdin, stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    rc = cli_main(list(argv), stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def reproducer_of(err: str) -> str:
    """The path named by the one-line internal-error message (and nothing else on stderr)."""
    lines = err.splitlines()
    assert len(lines) == 1, err
    m = _BUG.match(lines[0])
    assert m, err
    assert os.path.exists(m[2])
    return m[2]


# ---- 0 and 1 -------------------------------------------------------------------------------------------------
def test_success_is_0():
    assert opt(["-", "-p", "cse"], LOOP)[0] == 0
    assert cli("compile", "-c", "torch.randn(3).exp()")[0] == 0


@pytest.mark.parametrize(
    "argv",
    [["-", "-p", "nope"], ["-", "-p", "cse", "-o", "/nonexistent-dir/out.ir"]],
    ids=["unknown-pass", "unwritable-output"],
)
def test_user_errors_are_1_in_irforge_opt(argv):
    rc, _out, err = opt(argv, LOOP)
    assert rc == 1 and "Traceback" not in err and "error: " in err


def test_user_errors_are_1_in_irforge(tmp_path):
    assert cli("compile", "-c", "torch.randn(3) @ torch.randn(4)")[0] == 1
    rc, _out, err = cli("compile", "-c", "torch.randn(3).exp()", "-o", str(tmp_path / "missing" / "out.ir"))
    assert rc == 1 and err.startswith("error: cannot write the output file ") and "No such file" in err


@pytest.mark.parametrize(
    ("main", "argv", "message"),
    [
        (opt_main, ["--no-such-flag"], "irforge-opt: error: unrecognized arguments: --no-such-flag"),
        (cli_main, ["compile", "-c", "x", "--ir", "nowhere"], "irforge compile: error: argument --ir: invalid choice"),
    ],
)
def test_usage_errors_are_1(main, argv, message, capsys):
    # argparse exits 2 on its own; 2 is kept for internal errors
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 1
    assert message in capsys.readouterr().err


# ---- 2 ------------------------------------------------------------------------------------------------------
def test_crashing_pass_is_2_with_a_reproducer_that_replays_it(tmp_path):
    rc, out, err = opt(["-", "-p", "cse,test-crash"], LOOP)
    assert rc == 2 and out == ""
    assert "internal error in pass 'test-crash': RuntimeError: deliberate crash" in err
    assert "Traceback" not in err
    path = reproducer_of(err)
    rc2, _out, err2 = opt([path, "--run-reproducer"])
    assert rc2 == 2 and "internal error in pass 'test-crash'" in err2
    for p in (path, reproducer_of(err2)):
        os.unlink(p)


def test_crashing_pass_with_crash_reproducer_writes_there(tmp_path):
    path = tmp_path / "crash.ir"
    rc, _out, err = opt(["-", "-p", "test-crash", f"--crash-reproducer={path}"], LOOP)
    assert rc == 2 and reproducer_of(err) == str(path)
    assert "test.loop %i in 0..4" in path.read_text()


def test_traceback_on_request(monkeypatch):
    monkeypatch.setenv("IRFORGE_TRACEBACK", "1")
    rc, _out, err = opt(["-", "-p", "test-crash"], LOOP)
    assert rc == 2
    assert "Traceback" in err and 'raise RuntimeError("deliberate crash")' in err
    os.unlink(reproducer_of(err.splitlines()[-1]))


def test_internal_error_in_a_compile_pass_is_2_with_the_torch_ir():
    rc, out, err = cli("compile", "-c", "torch.randn(3).exp()", "--pass-pipeline", "torch-to-tensor,test-crash")
    assert rc == 2 and out == ""
    path = reproducer_of(err)
    text = open(path).read()
    assert "torch.aten.exp" in text and "test-crash" in text.splitlines()[0]
    os.unlink(path)


def test_internal_error_outside_passes_is_2_with_the_command_as_reproducer(monkeypatch):
    def broken(*a, **k):
        raise KeyError("oops")

    monkeypatch.setattr(irforge.compiler, "compile_program", broken)
    rc, _out, err = cli("compile", "-c", "torch.randn(3).exp()")
    assert rc == 2
    path = reproducer_of(err)
    assert "irforge compile -c 'torch.randn(3).exp()'" in open(path).read()
    os.unlink(path)


# ---- 130 ----------------------------------------------------------------------------------------------------
class _Interrupted(io.StringIO):
    def read(self, *a):
        raise KeyboardInterrupt


def test_ctrl_c_is_130_in_irforge_opt():
    rc, out, err = opt(["-"], _Interrupted())
    assert (rc, out, err) == (130, "", "irforge-opt: interrupted\n")


def test_ctrl_c_is_130_without_a_traceback_in_irforge(tmp_path):
    ready = tmp_path / "ready"
    snippet = f"import time; open({str(ready)!r}, 'w').close(); time.sleep(60)\ntorch.randn(3)"
    exe = os.path.join(os.path.dirname(sys.executable), "irforge")
    proc = subprocess.Popen([exe, "compile", "-c", snippet], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert (out, err) == ("", "irforge: interrupted\n")
