"""An out-of-tree irforge plugin: a pass and a dialect, registered through entry points (see pyproject.toml)."""

from irforge import Pass, option
from irforge.dialect import Dialect
from irforge.ir import Operation


class DropAttributes(Pass):
    """Remove the named attributes from every op."""

    name = "drop-attrs"
    input_level = "any"  # works on IR of any level

    names: tuple[str, ...] = option(("tag",), help="attribute names to remove")

    def run(self, op):
        for inner in op.walk():
            for key in self.names:
                inner.attributes.pop(key, None)


class NoteOp(Operation):
    """A free-form annotation of values (no custom syntax: it prints and parses in the generic form)."""

    name = "example.note"
    operand_names = ("*values",)
    result_names = ()


dialect = Dialect(name="example", summary="an out-of-tree dialect", ops=(NoteOp,))
