"""The generated reference pages (docs/passes.md, docs/ops/*.md) must match what the generator writes now, and say
what the code says."""

from __future__ import annotations

from pathlib import Path

from irforge.tools import gen_docs

DOCS = Path(__file__).parent.parent / "docs"


def test_generated_pages_are_up_to_date():
    assert gen_docs.main(["--check", str(DOCS)]) == 0, "run: python -m irforge.tools.gen_docs"


def test_check_fails_on_a_stale_page(tmp_path, capsys):
    assert gen_docs.main([str(tmp_path)]) == 0 and gen_docs.main(["--check", str(tmp_path)]) == 0
    (tmp_path / "ops" / "loop.md").write_text("# stale\n")
    assert gen_docs.main(["--check", str(tmp_path)]) == 1
    assert f"out of date: {tmp_path / 'ops' / 'loop.md'}" in capsys.readouterr().err


def test_every_pass_option_and_pipeline_is_documented():
    from irforge.registry import registry

    text = gen_docs.render_passes()
    passes = registry().passes()
    own = [n for n in passes if registry().sources[("pass", n)].startswith("irforge.passes.")]
    assert own and all(f"## `{n}`" in text for n in own)
    assert "test-" not in text  # the test passes are a plugin of the tests: not irforge's
    assert all(f"### `{p}`" in text for p in ("torch-to-cuda", "loop-to-tile", "tensor-to-loop"))
    assert "`torch-to-tensor,tensor-to-loop,loop-to-tile,tile-to-kernel,kernel-to-cuda`" in text
    section = "\n".join(gen_docs.pass_section(passes["test-options"]))
    assert "| `threads` | int | `128` | 32..1024 pow2 | a power of two |" in section
    assert "| `tiles` | list[int] | `16,16` |  | a list of integers |" in section
    assert '| `label` | str | `""` |  | any text |' in section
    hint = "\n".join(gen_docs.pass_section(passes["test-loop-hint"]))
    assert "- runs on: each `loop` op" in hint and "- levels: any → any" in hint


def test_the_op_reference_says_what_each_op_is():
    pages = gen_docs.pages()
    store = pages["ops/loop.md"].split("## `loop.store`")[1].split("\n## ")[0]
    assert "| operands | `buffer`, `indices` (variadic), `value` |" in store  # the operand order, looked up
    assert 'loop_store: "loop.store" VALUE_ID loop_subscript "=" value_use' in store
    reduce = pages["ops/tensor.md"].split("## `tensor.reduce`")[1].split("\n## ")[0]
    assert "| traits | pure |" in reduce and "tensor_reduce:" in reduce
    kernel = pages["ops/tile.md"].split("## `tile.kernel`")[1].split("\n## ")[0]
    assert "| pipeline anchor | `kernel(...)` |" in kernel and "| regions | 1 |" in kernel
    assert "scalar_math: SCALAR_MATH_OP value_uses" in pages["ops/scalar.md"].split("## `scalar.add`")[1]
    assert "torch_aten: TORCH_OP_NAME" in pages["ops/torch.md"]
    assert "ops/test.md" not in pages  # the tests' dialect is a plugin
    from irforge.registry import registry

    for name, d in registry().dialects().items():
        if name != "test":
            page = pages[f"ops/{name}.md"]
            assert all(f"## `{op.name}`" in page for op in d.ops), name
