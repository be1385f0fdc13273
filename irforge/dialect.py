"""What a dialect is: its ops, types, custom grammar and syntax callbacks, level, and reference interpreter."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

# The six levels, highest first. A level-neutral dialect (builtin, func) has level None.
LEVELS = ("torch", "tensor", "loop", "tile", "kernel", "cuda")


@dataclass(frozen=True)
class Dialect:
    """A dialect as the registry sees it.

    `grammar` is lark text appended to the core grammar; it must `%extend custom_op:` with its rules, every rule
    starting with the op's name keyword. `syntax` is a mixin class whose methods, named after those rules, turn parse
    results into `parser.OpAST`s. `interpreter` names the reference interpreter as "module:callable", loaded lazily.

    `op_families` are op classes standing for every op whose name starts with their `name`, which ends in a dot
    (`torch.aten.` covers `torch.aten.mm`, `torch.aten.add.Tensor`, ...): for dialects that mirror an open-ended
    op set. Each op built from a family class carries its own full name.
    """

    name: str
    summary: str
    ops: tuple = ()
    types: tuple = ()
    level: str | None = None
    grammar: str = ""
    syntax: type | None = None
    interpreter: str | None = None
    op_families: tuple = ()

    def __post_init__(self):
        if self.level is not None and self.level not in LEVELS:
            raise ValueError(f"dialect {self.name}: unknown level {self.level!r}; levels are {', '.join(LEVELS)}")
        for op in self.ops:
            if not op.name.startswith(self.name + "."):
                raise ValueError(f"dialect {self.name}: op {op.name} must be named {self.name}.<op>")
        for fam in self.op_families:
            if not (fam.name.startswith(self.name + ".") and fam.name.endswith(".")):
                raise ValueError(f"dialect {self.name}: op family {fam.name} must be named {self.name}.<prefix>.")


def grammar_file(package: str, filename: str) -> str:
    """Read a dialect's `.lark` file that sits beside its code."""
    return resources.files(package).joinpath(filename).read_text(encoding="utf-8")


def level_index(level: str) -> int:
    return LEVELS.index(level)
