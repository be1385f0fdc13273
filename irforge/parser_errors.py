"""Syntax errors as the parser reports them: what was found, and what it expected there in words."""

from __future__ import annotations

import re

from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from .diagnostics import IRForgeError, error
from .location import FileLineColLoc

# ---- errors ----------------------------------------------------------------------------------------------------
_TERMINAL_WORDS = {
    "VALUE_ID": "an SSA value (%name)",
    "BLOCK_ID": "a block label (^name)",
    "SYMBOL_ID": "a symbol (@name)",
    "DIALECT_TYPE": "a dialect type (!name)",
    "SCALAR_TYPE": "a type",
    "DIM_ID": "a dimension (d0, d1, ...)",
    "BARE_KEY": "a name",
    "STRING": "a string",
    "FLOAT": "a number",
    "INT": "an integer",
    "$END": "end of input",
    "<op>": "an operation",
    "RBRACE": "'}'",
}


def _describe(lark: Lark, name: str) -> str:
    if name in _TERMINAL_WORDS:
        return _TERMINAL_WORDS[name]
    try:
        term = lark.get_terminal(name)
    except KeyError:
        return name.lower()
    if term.pattern.type == "str":
        return f"'{term.pattern.value}'"
    return name.lower().replace("_", " ")


def _syntax_error(e: UnexpectedInput, lark: Lark, file: str, text: str) -> IRForgeError:
    line, col = max(e.line, 1), max(e.column, 1)
    expected = set(getattr(e, "expected", None) or ())
    # Where an op may start, every op keyword is acceptable: say "an operation" instead of listing them.
    op_position = "STRING" in expected and any(t.startswith("KW_") for t in expected)
    if op_position:
        expected = {t for t in expected if not t.startswith("KW_") and t not in _OP_STARTS} | {"<op>"}
    if isinstance(e, UnexpectedCharacters):
        ch = text[e.pos_in_stream] if 0 <= e.pos_in_stream < len(text) else "?"
        msg = "unterminated string" if ch == '"' else f"unexpected character {ch!r}"
    elif isinstance(e, UnexpectedEOF) or (isinstance(e, UnexpectedToken) and e.token.type == "$END"):
        body = text.rstrip()  # point just past the last thing written
        line, col = body.count("\n") + 1, len(body) - body.rfind("\n")
        msg = "unexpected end of input"
    elif op_position and _OP_NAME.fullmatch(str(e.token)):
        msg = f"unknown operation '{e.token}'; an op without custom syntax is written in the generic form"
        return error(f'{msg}, "{e.token}"(...) : (...) -> (...)', FileLineColLoc(file, line, col))
    else:
        tok = str(e.token)
        msg = f"unexpected {tok[:40] + '...' if len(tok) > 40 else tok!r}"
    words = sorted({_describe(lark, t) for t in expected if not t.startswith("__")})
    if words and len(words) <= 8:
        msg += "; expected " + (words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1])
    return error(msg, FileLineColLoc(file, line, col))


_OP_STARTS = {"STRING", "RESULT_ID", "__NO_CUSTOM_OP__"}
_OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z0-9_$]+)+")
