"""Run the whole lit suite inside pytest, so CI counts it, and lint its CHECK lines."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LIT_DIR = Path(__file__).parent / "lit"
BIN = os.path.dirname(sys.executable)

# Directives FileCheck understands; anything else shaped like one is a typo that would silently never run.
_SUFFIXES = {"", "-NEXT", "-SAME", "-NOT", "-DAG", "-LABEL", "-EMPTY"}
_DIRECTIVE = re.compile(r"(?://|#|;)\s*([A-Z][A-Z0-9_]*(?:-[A-Z0-9]+)*)\s*:")
_COUNT = re.compile(r"-COUNT-\d+$")


def lit_files() -> list[Path]:
    return sorted(p for p in LIT_DIR.rglob("*") if p.suffix in (".ir", ".test") and "Output" not in p.parts)


def lint(path: Path) -> list[str]:
    """Misspelled directives, RUN lines checking their own file, filecheck runs without a CHECK line."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    runs = [ln.split("RUN:", 1)[1] for ln in lines if "RUN:" in ln]
    used = set()  # prefixes some filecheck invocation reads
    for r in runs:
        for call in re.findall(r"filecheck[^|;&]*", r):
            used.update(re.findall(r"--check-prefix[= ](\w[\w-]*)", call) or ["CHECK"])
    problems = []
    seen = set()
    for n, line in enumerate(lines, 1):
        for m in _DIRECTIVE.finditer(line):
            word = m.group(1)
            if word in ("RUN", "COM", "REQUIRES", "UNSUPPORTED", "XFAIL", "ALLOW_RETRIES"):
                continue
            base = next((p for p in sorted(used | {"CHECK"}, key=len, reverse=True) if word.startswith(p)), None)
            suffix = _COUNT.sub("", word[len(base) :]) if base else None
            if base is None or suffix not in _SUFFIXES:
                problems.append(f"{path}:{n}: unknown directive '{word}:'")
            else:
                seen.add(base)
    for r in runs:
        if "filecheck" in r and (
            re.search(r"--input-file[= ]%s\b", r) or re.search(r"\bcat %s\b[^|]*\|\s*filecheck", r)
        ):
            problems.append(f"{path}: a RUN line feeds the test file itself to filecheck (it checks nothing)")
    problems += [f"{path}: filecheck reads {p}: lines but the file has none" for p in sorted(used - seen)]
    return problems


def test_lit_files_exist():
    assert len(lit_files()) >= 1


@pytest.mark.parametrize("path", lit_files(), ids=lambda p: str(p.relative_to(LIT_DIR)))
def test_lint(path):
    assert lint(path) == []


def test_lint_catches_mistakes(tmp_path):
    bad = tmp_path / "bad.ir"
    bad.write_text("// RUN: irforge-opt %s | filecheck %s\n// CHECK-NXT: x\n// CHECK: y\n")
    assert any("CHECK-NXT" in p for p in lint(bad))
    selfcheck = tmp_path / "self.ir"
    selfcheck.write_text("// RUN: filecheck %s --input-file=%s\n// CHECK: RUN\n")
    assert any("itself" in p for p in lint(selfcheck))
    nocheck = tmp_path / "none.ir"
    nocheck.write_text("// RUN: irforge-opt %s | filecheck %s\n")
    assert any("has none" in p for p in lint(nocheck))
    good = tmp_path / "good.ir"
    good.write_text("// RUN: irforge-opt %s | filecheck %s\n// CHECK-LABEL: a\n// CHECK-COUNT-2: b\n")
    assert lint(good) == []


@pytest.mark.slow
def test_lit_suite():
    lit = shutil.which("lit", path=os.pathsep.join([BIN, os.environ.get("PATH", "")]))
    assert lit, "the 'lit' command is missing: install with '.[dev]'"
    env = {**os.environ, "IRFORGE_BIN": BIN}
    proc = subprocess.run(
        [lit, "-q", "-j", str(os.cpu_count() or 2), str(LIT_DIR)], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, f"lit failed:\n{proc.stdout}\n{proc.stderr}"
