"""Source locations carried by every operation.

A location says where an op came from: a position in a `.ir` file, a line of the user's Python program, or a
free-form origin (`NameLoc`, e.g. the ATen op a tensor op was decomposed from) wrapping one of those. Locations are
immutable and never take part in structural equality, so passes can copy them freely.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


class Location:
    """Base class; `UNKNOWN` is the location of ops built without one."""

    def file_line_col(self) -> FileLineColLoc | None:
        """The innermost file position this location points at, if any."""
        return None


@dataclass(frozen=True, slots=True)
class UnknownLoc(Location):
    def __str__(self) -> str:
        return "loc(unknown)"

    def body(self) -> str:
        return "unknown"


UNKNOWN = UnknownLoc()


@dataclass(frozen=True, slots=True)
class FileLineColLoc(Location):
    file: str
    line: int
    col: int

    def file_line_col(self) -> FileLineColLoc:
        return self

    def __str__(self) -> str:
        return f"loc({self.body()})"

    def body(self) -> str:
        return f"{json.dumps(self.file, ensure_ascii=False)}:{self.line}:{self.col}"


@dataclass(frozen=True, slots=True)
class NameLoc(Location):
    """A named origin (`"aten.rms_norm"`), optionally wrapping the position it stands for."""

    name: str
    child: Location = UNKNOWN

    def file_line_col(self) -> FileLineColLoc | None:
        return self.child.file_line_col()

    def __str__(self) -> str:
        return f"loc({self.body()})"

    def body(self) -> str:
        name = json.dumps(self.name, ensure_ascii=False)
        if isinstance(self.child, UnknownLoc):
            return name
        return f"{name}({self.child.body()})"


@dataclass(frozen=True, slots=True)
class FusedLoc(Location):
    """Several origins merged into one op (fusion)."""

    locs: tuple[Location, ...]

    def file_line_col(self) -> FileLineColLoc | None:
        for loc in self.locs:
            if (flc := loc.file_line_col()) is not None:
                return flc
        return None

    def __str__(self) -> str:
        return f"loc({self.body()})"

    def body(self) -> str:
        return "fused[" + ", ".join(loc.body() for loc in self.locs) + "]"


def fuse(locs) -> Location:
    """One location for several: unknowns dropped, duplicates folded, a single survivor returned as is."""
    out: list[Location] = []
    for loc in locs:
        parts = loc.locs if isinstance(loc, FusedLoc) else (loc,)
        for part in parts:
            if not isinstance(part, UnknownLoc) and part not in out:
                out.append(part)
    if not out:
        return UNKNOWN
    return out[0] if len(out) == 1 else FusedLoc(tuple(out))
