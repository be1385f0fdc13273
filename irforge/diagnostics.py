"""Diagnostics: located messages, the project's one error type, and rendering with the source line and a caret.

Every user mistake (bad IR, unknown pass, bad option, unsupported torch op) raises `IRForgeError`, which the tools
print as `file:line:col: error: message`, the offending source line and a caret, then exit 1. A bug in irforge
itself surfaces as `InternalError` (exit 2), with a reproducer written for it. Sources are registered
with `register_source` when they are read, so any later diagnostic that points into them can show its line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .location import UNKNOWN, Location

_SOURCES: dict[str, str] = {}


def register_source(name: str, text: str) -> None:
    """Remember a source text so diagnostics pointing into it can quote the line."""
    _SOURCES[name] = text


def source_line(name: str, line: int) -> str | None:
    text = _SOURCES.get(name)
    if text is None:
        try:
            with open(name, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            return None
        _SOURCES[name] = text
    lines = text.split("\n")  # as the lexer counts lines (splitlines also breaks at \x85, \u2028, ...)
    return lines[line - 1].rstrip("\r") if 0 < line <= len(lines) else None


def decode_source(data: bytes, name: str, encoding: str = "utf-8") -> str:
    """The text of a file's bytes, registered for diagnostics; undecodable bytes are a located error."""
    from .location import FileLineColLoc

    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as e:
        register_source(name, data.decode(encoding, errors="replace"))  # so the message can quote the line
        line = data.count(b"\n", 0, e.start) + 1
        col = len(data[data.rfind(b"\n", 0, e.start) + 1 : e.start].decode(encoding, errors="replace")) + 1
        loc = FileLineColLoc(name, line, col)
        raise error(f"input is not {encoding.upper()} text (byte 0x{data[e.start]:02x})", loc) from None
    register_source(name, text)
    return text


@dataclass
class Diagnostic:
    severity: str  # "error" | "warning" | "note" | "remark"
    message: str
    loc: Location = UNKNOWN
    notes: list[Diagnostic] = field(default_factory=list)

    def render(self, with_source: bool = True) -> str:
        flc = self.loc.file_line_col()
        prefix = f"{flc.file}:{flc.line}:{flc.col}: " if flc else ""
        out = [f"{prefix}{self.severity}: {self.message}"]
        if flc and with_source:
            src = source_line(flc.file, flc.line)
            if src is not None:
                out.append(src)
                # Keep tabs so the caret lines up under the same column in a terminal.
                pad = "".join(c if c == "\t" else " " for c in src[: max(flc.col - 1, 0)])
                out.append(pad + "^")
        out.extend(note.render(with_source) for note in self.notes)
        return "\n".join(out)


class IRForgeError(Exception):
    """The project's error type: one or more located diagnostics, shown to the user without a traceback."""

    def __init__(self, message: str | list[Diagnostic], loc: Location = UNKNOWN, notes=()):
        if isinstance(message, list):
            self.diagnostics = message
        else:
            self.diagnostics = [Diagnostic("error", message, loc, list(notes))]
        super().__init__(self.diagnostics[0].message if self.diagnostics else "error")

    def __str__(self) -> str:
        """`file:line:col: message` (the message alone when it has no location), then any notes and further
        diagnostics as the tools print them, without the quoted source lines `render` adds."""
        if not self.diagnostics:
            return "error"
        first, *rest = self.diagnostics
        flc = first.loc.file_line_col()
        lines = [f"{flc.file}:{flc.line}:{flc.col}: {first.message}" if flc else first.message]
        lines += [d.render(with_source=False) for d in (*first.notes, *rest)]
        return "\n".join(lines)

    @property
    def message(self) -> str:
        """The first diagnostic's message alone."""
        return self.diagnostics[0].message if self.diagnostics else "error"

    def __reduce__(self):  # picklable whatever a subclass's __init__ takes: errors cross process boundaries
        return (_rebuild_error, (type(self), self.__dict__))

    @property
    def loc(self) -> Location:
        return self.diagnostics[0].loc

    def render(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)


def _rebuild_error(cls, state: dict) -> IRForgeError:
    e = Exception.__new__(cls)
    e.__dict__.update(state)
    Exception.__init__(e, str(e))
    return e


def error(message: str, loc: Location = UNKNOWN, notes=()) -> IRForgeError:
    """Build (not raise) an error, so call sites read `raise error(...)`."""
    return IRForgeError(message, loc, [Diagnostic("note", m, lc) for m, lc in notes])


class InternalError(Exception):
    """A bug in irforge, not the user's mistake: where it happened, the Python exception, and the reproducer file
    written for it (set by whoever writes one: the pass manager's `Reproducer`, or the tool)."""

    def __init__(self, where: str, cause: BaseException, reproducer: str | None = None):
        self.where, self.cause, self.reproducer = where, cause, reproducer
        text = str(cause).strip()
        first = text.splitlines()[0] if text else ""
        super().__init__(f"{where}: {type(cause).__name__}" + (f": {first}" if first else ""))
