"""The corpus (tests/corpus/): every program compiles to the tensor level and its reference interpreter matches
PyTorch eager; the torch level's interpreter does too; and the tensor IR round-trips through its text."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from irforge import frontend
from irforge.compiler import compile_program
from irforge.parser import parse_module
from irforge.printer import print_module

CORPUS = Path(__file__).parent / "corpus"
SNIPPETS = tomllib.loads((CORPUS / "snippets.toml").read_text(encoding="utf-8"))
FILES = sorted(CORPUS.glob("*.py"))
PROGRAMS = [(name, entry) for name, entry in SNIPPETS.items()] + [(p.stem, {"file": str(p)}) for p in FILES]


def load(entry) -> frontend.TorchProgram:
    if "file" in entry:
        return frontend.from_file(entry["file"])
    return frontend.from_snippet(entry["code"].strip())


def test_corpus_size():
    assert len(PROGRAMS) >= 40


@pytest.mark.parametrize("entry", [e for _, e in PROGRAMS], ids=[n for n, _ in PROGRAMS])
def test_tensor_level_matches_eager(entry):
    prog = compile_program(load(entry), "tensor")
    assert all(op.dialect in ("tensor", "func") for op in prog.module.walk() if op.name != "builtin.module")
    for i, c in enumerate(prog.check()):
        tol = entry.get("tol")
        assert (c.max_rel <= tol) if tol is not None else c.ok, f"output #{i}: {c}"
    text = print_module(prog.module)
    assert print_module(parse_module(text)) == text


@pytest.mark.parametrize("entry", [e for _, e in PROGRAMS], ids=[n for n, _ in PROGRAMS])
def test_torch_level_matches_eager(entry):
    prog = compile_program(load(entry), "torch")
    for i, c in enumerate(prog.check()):
        assert c.ok, f"output #{i}: {c}"
    text = print_module(prog.module)
    assert print_module(parse_module(text)) == text
