"""docs/passes.md is generated from the passes; it must match what the generator writes now."""

from __future__ import annotations

from pathlib import Path

from irforge.tools import gen_docs

PASSES_MD = Path(__file__).parent.parent / "docs" / "passes.md"


def test_passes_md_is_up_to_date():
    assert gen_docs.main(["--check", str(PASSES_MD)]) == 0, "run: python -m irforge.tools.gen_docs docs/passes.md"


def test_check_fails_on_a_stale_file(tmp_path, capsys):
    stale = tmp_path / "passes.md"
    stale.write_text("# Passes\n")
    assert gen_docs.main(["--check", str(stale)]) == 1
    assert "out of date" in capsys.readouterr().err
    assert gen_docs.main([str(stale)]) == 0 and gen_docs.main(["--check", str(stale)]) == 0


def test_every_pass_and_option_is_documented():
    text = gen_docs.render()
    assert "| [`test-tensor-to-loop`](#test-tensor-to-loop) | tensor → loop | Declare a tensor -> loop lowering" in text
    assert "## `test-loop-hint`" in text and "- runs on: each `loop` op" in text
    assert "| `threads` | int | `128` | 32..1024 pow2 | a power of two |" in text
    assert "| `tiles` | list[int] | `16,16` |  | a list of integers |" in text
    assert '| `label` | str | `""` |  | any text |' in text
