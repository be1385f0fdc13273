"""docs/writing-a-pass.md runs as written: its Python blocks, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from irforge.registry import reset_registry

GUIDE = Path(__file__).parent.parent / "docs" / "writing-a-pass.md"


@pytest.fixture
def fresh_registry():
    reset_registry()
    yield
    reset_registry()  # the guide registers its pass


def test_the_guide_runs(fresh_registry):
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 6
    namespace: dict = {"__name__": "guide"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{GUIDE.name} block {i + 1}", "exec"), namespace)
    assert "tensor-div-to-mul" in namespace["registry"]().passes()
