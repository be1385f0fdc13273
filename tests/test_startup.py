"""irforge-opt starts fast: `--help` imports neither torch nor lark, a pipeline imports only the passes it names, and
listing passes or dialects (which loads every built-in pass and dialect module) does not import torch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def modules_after(code: str, env: dict | None = None) -> set[str]:
    script = f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
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


def test_a_pipeline_imports_only_the_passes_it_names(tmp_path):
    """The first run builds the index of built-in passes (importing them all) into the cache folder; later runs
    read it and import only what the pipeline names."""
    code = (
        "import io\nfrom irforge.tools.opt import main\n"
        "assert main(['--pass-pipeline=cse,dce', '--dump-pass-pipeline'], stderr=io.StringIO()) == 0"
    )
    env = {**os.environ, "IRFORGE_CACHE_DIR": str(tmp_path)}
    passes = lambda loaded: {m for m in loaded if m.startswith("irforge.passes.")}
    assert "irforge.passes.tile.blockify" in passes(modules_after(code, env))
    assert passes(modules_after(code, env)) == {
        "irforge.passes.generic",
        "irforge.passes.generic.cse",
        "irforge.passes.generic.dce",
    }


def test_the_executable_ends_with_mains_exit_code(tmp_path):
    """`irforge-opt` freezes what is alive before exiting (`driver.exit_process`): its output and exit code are
    main's."""
    src = tmp_path / "in.ir"
    src.write_text("func.func @f(%a: f32) -> f32 {\n  func.return %a\n}\n")
    opt = [sys.executable, "-m", "irforge.tools.opt", str(src)]
    ok = subprocess.run([*opt, "-o", str(tmp_path / "out.ir")], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "func.return %a" in (tmp_path / "out.ir").read_text()
    bad = subprocess.run([*opt, "--pass-pipeline=no-such-pass"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "unknown pass or pipeline 'no-such-pass'" in bad.stderr
