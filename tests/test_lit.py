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


LIT_SHARDS = 8


def lit_shards() -> list[list[Path]]:
    """The lit files in LIT_SHARDS groups of about equal cost (RUN lines, a torch-importing `irforge` CLI run
    counting as several), so that pytest-xdist spreads them over its workers like any other tests."""

    def cost(p: Path) -> int:
        runs = [ln for ln in p.read_text(encoding="utf-8").splitlines() if "RUN:" in ln]
        return sum(8 if re.search(r"\birforge (compile|bench|tune|generate)\b", r) else 1 for r in runs)

    tests = [p for p in lit_files() if "Inputs" not in p.parts]  # lit's excludes (lit.cfg.py)
    shards: list[list[Path]] = [[] for _ in range(LIT_SHARDS)]
    load = [0] * LIT_SHARDS
    for p in sorted(tests, key=cost, reverse=True):
        i = load.index(min(load))
        shards[i].append(p)
        load[i] += cost(p)
    return shards


@pytest.mark.slow
@pytest.mark.parametrize("shard", range(LIT_SHARDS))
def test_lit_suite(shard):
    lit = shutil.which("lit", path=os.pathsep.join([BIN, os.environ.get("PATH", "")]))
    assert lit, "the 'lit' command is missing: install with '.[dev]'"
    files = [str(p) for p in lit_shards()[shard]]
    env = {**os.environ, "IRFORGE_BIN": BIN}
    proc = subprocess.run([lit, "-q", "-j", "1", *files], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, f"lit failed:\n{proc.stdout}\n{proc.stderr}"


def test_the_shards_hold_every_lit_test_once():
    together = [p for shard in lit_shards() for p in shard]
    tests = [p for p in lit_files() if "Inputs" not in p.parts]
    assert sorted(together) == tests and all(lit_shards()) and len(tests) >= 150
