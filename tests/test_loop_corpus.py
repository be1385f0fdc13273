"""Every corpus program (tests/corpus/) at the loop level: the loop interpreter matches PyTorch eager at the
tolerances of the tensor level, the loop IR round-trips through its text, and the decoder layer fits in 12
kernels."""

from __future__ import annotations

import dataclasses

import pytest
from irforge.dialects.loop import KernelOp
from test_corpus import PROGRAMS, at_level

from irforge.parser import parse_module
from irforge.pass_manager import run_pipeline
from irforge.pipeline import module_level
from irforge.printer import print_module


@pytest.mark.parametrize("name", [n for n, _ in PROGRAMS])
def test_loop_level_matches_eager(name):
    entry = dict(PROGRAMS)[name]
    tensor = at_level(name, "tensor")
    module = tensor.module.clone()
    run_pipeline(module, "tensor-to-loop")
    prog = dataclasses.replace(tensor, module=module, level="loop")
    assert module_level(module) == "loop"
    for i, c in enumerate(prog.check()):
        tol = entry.get("tol")
        assert (c.max_rel <= tol) if tol is not None else c.ok, f"output #{i}: {c}"
    text = print_module(module)
    assert print_module(parse_module(text)) == text
    if name.startswith("llama_decoder"):
        assert sum(isinstance(op, KernelOp) for op in module.walk()) <= 12
