"""Every corpus program (tests/corpus/) at the loop level: the loop interpreter matches PyTorch eager at the
tolerances of the tensor level, the loop IR round-trips through its text, and the decoder layer fits in 12
kernels."""

from __future__ import annotations

import pytest
from irforge.dialects.loop import KernelOp
from test_corpus import PROGRAMS, load

from irforge.compiler import compile_program
from irforge.parser import parse_module
from irforge.pipeline import module_level
from irforge.printer import print_module


@pytest.mark.parametrize(("name", "entry"), PROGRAMS, ids=[n for n, _ in PROGRAMS])
def test_loop_level_matches_eager(name, entry):
    prog = compile_program(load(entry), "loop")
    assert module_level(prog.module) == "loop"
    for i, c in enumerate(prog.check()):
        tol = entry.get("tol")
        assert (c.max_rel <= tol) if tol is not None else c.ok, f"output #{i}: {c}"
    text = print_module(prog.module)
    assert print_module(parse_module(text)) == text
    if name.startswith("llama_decoder"):
        assert sum(isinstance(op, KernelOp) for op in prog.module.walk()) <= 12
