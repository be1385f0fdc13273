"""The README's and the docs' commands keep working, and the docs speak of the repository alone.

Every `irforge` and `irforge-opt` command in a shell block of README.md and docs/ runs in a folder holding the files
the commands name (a `model.py`, its IR at each level), and must succeed. The ones that need what a test cannot have
are left out, each for a stated reason: a GPU, a plugin that is not installed, a placeholder path, a whole model.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

# In document order on one worker: a later command reads what an earlier one wrote (docs/tuning.md's tuned.ir),
# and the folder of files is made once.
pytestmark = pytest.mark.xdist_group("doc-commands")

ROOT = Path(__file__).parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BIN = Path(sys.executable).parent

MODEL = """\
import torch

model = torch.nn.RMSNorm(64)
example_inputs = (torch.randn(2, 8, 64),)
"""

# (what in the command, why it is left out)
LEFT_OUT = [
    ("on a GPU", "needs a GPU"),
    ("irforge run", "needs a GPU"),
    ("irforge generate", "needs a GPU and a whole model"),
    ("--suite seed84 -o", "needs a GPU"),
    ("--cases", "needs a GPU"),
    ("--cache DIR", "a placeholder folder, and a whole suite to compile"),
    ("json", "needs results of GPU runs"),
    ("path/to/model", "a placeholder path"),
    ("tinyllama", "compiles a whole model (tests/test_models.py covers it)"),
    ("my-pass", "a placeholder pass"),
    ("drop-attrs", "a plugin (tests/test_plugins.py installs it)"),
    ("|", "a pipe into other tools"),
    ("irforge tune", "needs a GPU or a tuning database (tests/test_tune.py runs --show, --export, --compile-only)"),
    ("--tuned", "needs a GPU"),
]


def commands() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        for block in re.findall(r"```(?:sh|bash)\n(.*?)```", doc.read_text(encoding="utf-8"), re.S):
            for line in block.splitlines():
                line = line.split("&& .venv/bin/")[-1].strip()  # the command, or its comment saying what it needs
                command = re.sub(r"\s+#.*$", "", line)
                if re.match(r"(irforge|irforge-opt) ", command):
                    out.append((f"{doc.relative_to(ROOT)}: {command}", line))
    return out


def reason_left_out(line: str) -> str | None:
    return next((why for what, why in LEFT_OUT if what in line), None)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """A folder with what the commands name: model.py, model.<level>.ir, input.ir."""
    d = tmp_path_factory.mktemp("doc-commands")
    (d / "model.py").write_text(MODEL)
    for level in ("loop", "tile"):
        proc = subprocess.run(
            [BIN / "irforge", "compile", "model.py", "--ir", level, "-o", f"model.{level}.ir"],
            cwd=d,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
    (d / "input.ir").write_text((d / "model.loop.ir").read_text())
    return d


@pytest.mark.parametrize(("where", "command"), commands(), ids=[w for w, _ in commands()])
def test_the_command_runs(where, command, sandbox):
    why = reason_left_out(command)
    if why:
        pytest.skip(why)
    argv = shlex.split(re.sub(r"\s+#.*$", "", command))
    argv[0] = str(BIN / argv[0])
    proc = subprocess.run(argv, cwd=sandbox, capture_output=True, text=True, timeout=600, env=os.environ)
    assert proc.returncode == 0, f"{where}\n{proc.stderr[-2000:]}"


def test_most_commands_run():
    runnable = [c for _, c in commands() if reason_left_out(c) is None]
    assert len(runnable) >= 10, runnable


_OUTSIDE = re.compile(r"(?<![\w.~-])/(work|home|root|opt|tmp|mnt|srv|var)/|\.\./shared|https?://|we agreed|the lead")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_speak_of_the_repository_alone(doc):
    text = doc.read_text(encoding="utf-8")
    assert not [m.group(0) for m in _OUTSIDE.finditer(text)]
    prose = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))  # links, not code
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", prose):
        path = (doc.parent / target).resolve()
        assert path.exists() and ROOT.resolve() in path.parents, f"{doc.name}: link to {target}"


def ir_examples() -> list[tuple[str, str]]:
    """The docs' whole programs: unlabelled blocks that start a function and elide nothing."""
    out = []
    for doc in DOCS:
        for k, text in enumerate(re.findall(r"```\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)):
            if text.startswith("func.func") and "..." not in text:
                out.append((f"{doc.relative_to(ROOT)}#{k}", text))
    return out


@pytest.mark.parametrize(("where", "text"), ir_examples(), ids=[w for w, _ in ir_examples()])
def test_the_docs_programs_parse_and_verify(where, text):
    from irforge import parse_module

    module = parse_module(text, where)
    again = parse_module(str(module), where)
    assert str(again) == str(module)


def test_the_dialect_pages_have_whole_programs():
    pages = {w.split("#")[0] for w, _ in ir_examples()}
    assert {f"docs/dialects/{d}.md" for d in ("torch", "tensor", "loop", "tile")} <= pages, pages
