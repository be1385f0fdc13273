"""irforge-opt starts fast: `--help` imports neither torch nor lark, and listing passes or dialects (which loads
every built-in pass and dialect module) does not import torch."""

from __future__ import annotations

import subprocess
import sys

import pytest


def modules_after(code: str) -> set[str]:
    script = f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split())


def test_help_imports_nothing_heavy():
    code = "from irforge.tools.opt import _arg_parser\n_arg_parser().format_help()"
    loaded = modules_after(code)
    assert not {"torch", "lark", "numpy", "irforge.registry", "irforge.parser"} & loaded


def test_help_output_runs_through_main():
    code = (
        "import contextlib, io\nfrom irforge.tools import opt\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n        opt.main(['--help'])\n    except SystemExit:\n        pass\n"
        "assert 'usage: irforge-opt' in out.getvalue()"
    )
    assert not {"torch", "lark", "numpy"} & modules_after(code)


@pytest.mark.parametrize("flag", ["--list-passes", "--list-dialects"])
def test_listing_does_not_import_torch(flag):
    code = f"import io\nfrom irforge.tools.opt import main\nassert main([{flag!r}], stdout=io.StringIO()) == 0"
    loaded = modules_after(code)
    assert "irforge.passes.generic.cse" in loaded or flag == "--list-dialects"
    assert "torch" not in loaded
