"""Plugins through the real entry-point machinery: install small distributions with pip into a folder, then run
irforge-opt in a fresh process with that folder on its path."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).parent / "plugin_example"
DOC = Path(__file__).parent.parent / "docs" / "plugins.md"
OPT = os.path.join(os.path.dirname(sys.executable), "irforge-opt")
PLUGINS = str(Path(__file__).parent / "plugins")

DUPLICATE_MODULE = '''
from irforge import Pass


class ShadowCse(Pass):
    """A plugin pass that takes a name irforge already has."""

    name = "cse"

    def run(self, op):
        pass
'''
DUPLICATE_PYPROJECT = """
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "irforge-plugin-duplicate"
version = "0.2.0"

[project.entry-points."irforge.passes"]
shadow = "irforge_plugin_duplicate:ShadowCse"

[tool.setuptools]
py-modules = ["irforge_plugin_duplicate"]
"""


def pip_install(source: Path, target: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Two folders of installed distributions: the example plugin, and a plugin whose pass is named 'cse'."""
    root = tmp_path_factory.mktemp("plugins")
    shutil.copytree(EXAMPLE, root / "example-src")  # pip builds in the source tree: keep the repository clean
    pip_install(root / "example-src", root / "example")
    dup = root / "duplicate-src"
    dup.mkdir()
    (dup / "irforge_plugin_duplicate.py").write_text(DUPLICATE_MODULE)
    (dup / "pyproject.toml").write_text(DUPLICATE_PYPROJECT)
    pip_install(dup, root / "duplicate")
    return root


def opt(paths, *argv, stdin=""):
    """irforge-opt with the plugins installed in `paths` (and the tests' own plugin: the test dialect)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*(str(p) for p in paths), PLUGINS])}
    return subprocess.run([OPT, *argv], input=stdin, capture_output=True, text=True, env=env, timeout=120)


IR = """\
func.func @f(%a: f32) {
  test.effect %a {keep = 1, tag = "x"}
  "example.note"(%a) {hint = 2, tag = "y"} : (f32) -> ()
  func.return
}
"""


def test_plugin_pass_runs_by_name(installed):
    proc = opt([installed / "example"], "-", "--pass-pipeline=drop-attrs{names=tag,hint}", stdin=IR)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == IR.replace(', tag = "x"', "").replace(' {hint = 2, tag = "y"}', "")


def test_plugin_pass_is_listed(installed):
    proc = opt([installed / "example"], "--list-passes")
    assert "drop-attrs  --  Remove the named attributes from every op.\n    level: any -> any\n" in proc.stdout
    assert "    names: list[str] = tag  -- attribute names to remove\n" in proc.stdout


def test_plugin_dialect_ops_roundtrip_in_generic_form(installed):
    assert (
        "example    -          1 ops  an out-of-tree dialect" in opt([installed / "example"], "--list-dialects").stdout
    )
    proc = opt([installed / "example"], "-", stdin=IR)  # no --allow-unregistered-dialect needed
    assert proc.returncode == 0 and proc.stdout == IR, proc.stderr
    without = opt([], "-", stdin=IR)
    assert without.returncode == 1 and "unknown operation 'example.note'" in without.stderr


def test_duplicate_name_names_both_sources(installed):
    proc = opt([installed / "example", installed / "duplicate"], "-", "--pass-pipeline=drop-attrs", stdin=IR)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr == (
        "error: pass 'cse' is registered twice: by irforge.passes.generic.cse and by plugin 'shadow' "
        "(irforge_plugin_duplicate:ShadowCse) from irforge-plugin-duplicate 0.2.0\n"
    )


def test_the_guide_shows_the_tested_plugin():
    """docs/plugins.md quotes the example's files verbatim, so the guide cannot drift from what is tested."""
    blocks = re.findall(r"```(?:python|toml)\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert blocks[0] == (EXAMPLE / "irforge_plugin_example.py").read_text(encoding="utf-8")
    assert blocks[1] == (EXAMPLE / "pyproject.toml").read_text(encoding="utf-8")
    assert len(blocks[0].splitlines()) <= 32
