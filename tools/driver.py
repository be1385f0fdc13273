"""How `irforge` and `irforge-opt` end: one wrapper around each command turns what happened into an exit code; and
writing the output file the user named.

| code | what happened                                                                           |
|------|-----------------------------------------------------------------------------------------|
| 0    | success                                                                                 |
| 1    | the user's mistake (IR, pipeline, option, program, file), reported as a located message |
| 2    | an internal error: a bug in irforge, one line saying so and where its reproducer is    |
| 130  | interrupted (Ctrl-C), without a traceback                                               |

`IRFORGE_TRACEBACK=1` prints the Python traceback of an internal error before that line.
"""

from __future__ import annotations

import gc
import os
import shlex
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

USER_ERROR, INTERNAL_ERROR, INTERRUPTED = 1, 2, 130


def guarded(prog: str, argv: list[str], command: Callable[[], int], stderr) -> int:
    """Run `command` (the tool's work, returning 0 or 1); map what it raises to a message and an exit code."""
    from irforge.diagnostics import InternalError, IRForgeError

    try:
        return command()
    except IRForgeError as e:
        stderr.write(e.render() + "\n")
        return USER_ERROR
    except KeyboardInterrupt:
        stderr.write(f"{prog}: interrupted\n")
        return INTERRUPTED
    except OSError as e:  # a file the user named cannot be read or written
        where = f": '{e.filename}'" if e.filename else ""
        stderr.write(f"{prog}: error: {e.strerror or e}{where}\n")
        return USER_ERROR
    except Exception as e:
        err = e if isinstance(e, InternalError) else InternalError(f"in {prog}", e)
        if os.environ.get("IRFORGE_TRACEBACK"):
            stderr.write("".join(traceback.format_exception(err.cause)))
        if err.reproducer is None:  # the command line reproduces it
            err.reproducer = _write_command(prog, argv)
        stderr.write(
            f"{prog}: internal error {err} -- this is a bug in irforge; please report it with the reproducer "
            f"written to {err.reproducer} (IRFORGE_TRACEBACK=1 shows the traceback)\n"
        )
        return INTERNAL_ERROR


def exit_process(code: int) -> NoReturn:
    """End the executable (`irforge-opt`, `irforge`) with `code`, once its `main` has returned.

    Tearing the interpreter down runs full garbage collections over everything still alive (the parser's tables, the
    IR, torch's modules when loaded): a quarter of a short `irforge-opt` run, which lit starts hundreds of times. None
    of it is garbage the process must reclaim, so it is frozen out of those collections (`gc.freeze`); exit handlers
    still run and the standard streams are still flushed."""
    gc.freeze()
    sys.exit(code)


def _write_command(prog: str, argv: list[str]) -> str:
    import tempfile

    fd, path = tempfile.mkstemp(prefix="irforge-reproducer-", suffix=".sh")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(f"#!/bin/sh\n# reproduces an internal error of {prog}\n{shlex.join([prog, *argv])}\n")
    return path


def write_output(path: str, text: str, stdout) -> None:
    """`text` to the file the user named with -o (`-`: stdout); a file that cannot be written is their error."""
    from irforge.diagnostics import error

    if path == "-":
        stdout.write(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise error(f"cannot write the output file '{path}': {e.strerror or e}") from None
