from __future__ import annotations

from irforge.pass_manager import Pass, option


class TestRename(Pass):
    """Set a `tag` attribute on every test.pure op (changes the IR in a predictable way)."""

    name = "test-tag"

    tag: str = option("tagged", help="the value to set")

    def run(self, op):
        for inner in op.walk():
            if inner.name == "test.pure":
                inner.attributes["tag"] = self.tag
