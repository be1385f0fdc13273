"""The corpus (tests/corpus/): every program compiles to the tensor level and its reference interpreter matches
PyTorch eager; the torch level's interpreter does too; and the tensor IR round-trips through its text."""

from __future__ import annotations

import dataclasses
import functools
import tomllib
from pathlib import Path

import pytest

from irforge import frontend
from irforge.compiler import Program, compile_program
from irforge.parser import parse_module
from irforge.pass_manager import run_pipeline
from irforge.printer import print_module

CORPUS = Path(__file__).parent / "corpus"
SNIPPETS = tomllib.loads((CORPUS / "snippets.toml").read_text(encoding="utf-8"))
FILES = sorted(CORPUS.glob("*.py"))
PROGRAMS = [(name, entry) for name, entry in SNIPPETS.items()] + [(p.stem, {"file": str(p)}) for p in FILES]


@functools.cache
def captured(name: str) -> Program:
    """The program at the torch level, captured once for both tests."""
    entry = dict(PROGRAMS)[name]
    tp = frontend.from_file(entry["file"]) if "file" in entry else frontend.from_snippet(entry["code"].strip())
    return compile_program(tp, "torch")


def at_level(name: str, level: str) -> Program:
    prog = captured(name)
    if level == "torch":
        return prog
    module = prog.module.clone()
    run_pipeline(module, "torch-to-tensor")
    return dataclasses.replace(prog, module=module, level=level)


def test_corpus_size():
    assert len(PROGRAMS) >= 40


@pytest.mark.parametrize("name", [n for n, _ in PROGRAMS])
def test_tensor_level_matches_eager(name):
    entry = dict(PROGRAMS)[name]
    prog = at_level(name, "tensor")
    assert all(op.dialect in ("tensor", "func") for op in prog.module.walk() if op.name != "builtin.module")
    for i, c in enumerate(prog.check()):
        tol = entry.get("tol")
        assert (c.max_rel <= tol) if tol is not None else c.ok, f"output #{i}: {c}"
    text = print_module(prog.module)
    assert print_module(parse_module(text)) == text


@pytest.mark.parametrize("name", [n for n, _ in PROGRAMS])
def test_torch_level_matches_eager(name):
    prog = at_level(name, "torch")
    for i, c in enumerate(prog.check()):
        assert c.ok, f"output #{i}: {c}"
    text = print_module(prog.module)
    assert print_module(parse_module(text)) == text
