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
    from irforge.registry import registry

    text = gen_docs.render()
    passes = registry().passes()
    own = [n for n in passes if registry().sources[("pass", n)].startswith("irforge.passes.")]
    assert all(f"## `{n}`" in text for n in own)
    assert "test-" not in text  # the test passes are a plugin of the tests: not irforge's
    section = "\n".join(gen_docs.pass_section(passes["test-options"]))
    assert "| `threads` | int | `128` | 32..1024 pow2 | a power of two |" in section
    assert "| `tiles` | list[int] | `16,16` |  | a list of integers |" in section
    assert '| `label` | str | `""` |  | any text |' in section
    hint = "\n".join(gen_docs.pass_section(passes["test-loop-hint"]))
    assert "- runs on: each `loop` op" in hint and "- levels: any → any" in hint
