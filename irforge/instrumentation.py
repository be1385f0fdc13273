"""The pass manager's instrumentations: one hook mechanism under every debugging flag.

| flag                                     | instrumentation |
|------------------------------------------|-----------------|
| verify after each pass (default on)      | `VerifyEach`    |
| irforge compile -v                       | `PrintPassNames`, `Remarks` |
| -debug-only=PASS[,PASS]                  | `Remarks`       |
| --print-ir-before/after[-all,-change,-failure] | `PrintIR` |
| --print-ir-diff                          | `PrintIRDiff`   |
| --print-ir-tree-dir=DIR                  | `IRTreeDir`     |
| --timing                                 | `Timing`        |
| --crash-reproducer=FILE                  | `Reproducer`    |
"""

from __future__ import annotations

import difflib
import os
import sys
import time
from dataclasses import dataclass, field

from .diagnostics import Diagnostic, InternalError
from .hashing import structural_hash
from .ir import Operation
from .pass_manager import Instrumentation, Timer
from .printer import Printer, print_module
from .verifier import verify_or_raise


class VerifyEach(Instrumentation):
    """Verify the module after every pass; a failure is that pass's failure."""

    def __init__(self, timer: Timer | None = None):
        self.timer = timer

    def after_pass(self, p, module):
        t0 = time.perf_counter()
        try:
            verify_or_raise(module, f"after pass '{p.name}'")
        finally:
            if self.timer is not None:
                self.timer.add("verify", time.perf_counter() - t0)


class PrintPassNames(Instrumentation):
    """One line per pass: its pipeline text (name and options) as it starts, then how long it took."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr

    def before_pass(self, p, module):
        self.stream.write(f"pass {p.text()}")
        self.stream.flush()
        self._t0 = time.perf_counter()

    def after_pass(self, p, module):
        self.stream.write(f"  ({(time.perf_counter() - self._t0) * 1e3:.1f} ms)\n")

    def after_failed_pass(self, p, module, err):
        self.stream.write("  FAILED\n")


@dataclass
class Remark:
    """What a pass said about a decision at an op (`Pass.remark`)."""

    pass_name: str
    op: Operation = field(repr=False)
    message: str

    def __str__(self) -> str:
        return Diagnostic("remark", f"[{self.pass_name}] {self.message}", self.op.loc).render(with_source=False)


class Remarks(Instrumentation):
    """The remarks of the passes named in `only` (every pass when None), each once per pass: kept in `records`,
    and, with a stream, written there as `file:line:col: remark: [pass] message` lines once the pass is done."""

    def __init__(self, only=None, stream=None):
        self.only = None if only is None else set(only)
        self.stream = stream
        self.records: list[Remark] = []
        self._pending: list[Remark] = []

    def before_pass(self, p, module):
        self._seen: set = set()

    def remark(self, p, op, message):
        key = (id(op), message)  # a pass that sweeps to a fixpoint may decide the same thing twice: say it once
        if (self.only is None or p.name in self.only) and key not in self._seen:
            self._seen.add(key)
            r = Remark(p.name, op, message)
            self.records.append(r)
            self._pending.append(r)

    def after_pass(self, p, module):
        if self.stream is not None and self._pending:
            self.stream.write("".join(f"{r}\n" for r in self._pending))
            self.stream.flush()
        self._pending = []

    def after_failed_pass(self, p, module, err):
        self.after_pass(p, module)


class _Printing(Instrumentation):
    def __init__(self, stream=None, generic: bool = False, debuginfo: bool = False):
        self.stream = stream or sys.stderr
        self.generic = generic
        self.debuginfo = debuginfo

    def text(self, module) -> str:
        return print_module(module, generic=self.generic, debuginfo=self.debuginfo)


class PrintIR(_Printing):
    """`--print-ir-before=a,b`, `--print-ir-after=a,b`, `-all`, `-change` (only when the IR changed), `-failure`."""

    def __init__(self, before=(), after=(), after_all=False, after_change=False, after_failure=False, **kw):
        super().__init__(**kw)
        self.before, self.after = set(before), set(after)
        self.after_all, self.after_change, self.after_failure = after_all, after_change, after_failure
        self._hash = None

    def before_pass(self, p, module):
        if p.name in self.before:
            self._dump(f"IR Dump Before {p.name}", module)
        if self.after_change:
            self._hash = structural_hash(module)

    def after_pass(self, p, module):
        wanted = self.after_all or p.name in self.after
        if self.after_change:
            wanted = (wanted or not self.after) and structural_hash(module) != self._hash
        if wanted:
            self._dump(f"IR Dump After {p.name}", module)

    def after_failed_pass(self, p, module, err):
        if self.after_failure:
            self._dump(f"IR Dump After {p.name} Failed", module)

    def _dump(self, title: str, module) -> None:
        self.stream.write(f"// -----// {title} //----- //\n{self.text(module)}")
        self.stream.flush()


class PrintIRDiff(_Printing):
    """A unified diff per pass that changed the IR, framed by `>>> pass` and `<<< pass` lines. Values the pass kept
    keep their names on both sides, so a pass that erases `%3` shows that line, not every later one renumbered."""

    def before_pass(self, p, module):
        printer = Printer(generic=self.generic, debuginfo=self.debuginfo)
        self._before = printer.module_to_string(module)
        self._names = printer.assigned

    def after_pass(self, p, module):
        after = Printer(generic=self.generic, debuginfo=self.debuginfo, names=self._names).module_to_string(module)
        if after == self._before:
            return
        diff = difflib.unified_diff(
            self._before.splitlines(keepends=True), after.splitlines(keepends=True), "before", "after"
        )
        self.stream.write(f">>> {p.name}\n{''.join(diff)}<<< {p.name}\n")
        self.stream.flush()


class IRTreeDir(_Printing):
    """`DIR/00_input.ir`, `DIR/01_<pass>.ir`, ... and `DIR/index.txt` (step, pass, changed?, milliseconds)."""

    def __init__(self, directory: str, **kw):
        super().__init__(**kw)
        self.dir = directory
        self.step = 0
        self.rows: list[str] = []

    def before_pipeline(self, module, pm):
        os.makedirs(self.dir, exist_ok=True)
        self._last = self.text(module)
        self._write("00_input.ir", self._last)
        self.rows = ["00  input  -  -"]

    def before_pass(self, p, module):
        self._t0 = time.perf_counter()

    def after_pass(self, p, module):
        ms = (time.perf_counter() - self._t0) * 1e3
        self.step += 1
        text = self.text(module)
        self._write(f"{self.step:02d}_{p.name}.ir", text)
        self.rows.append(f"{self.step:02d}  {p.name}  {'changed' if text != self._last else 'unchanged'}  {ms:.2f}")
        self._last = text
        self._write("index.txt", "\n".join(self.rows) + "\n")

    def after_failed_pass(self, p, module, err):
        self.step += 1
        self._write(f"{self.step:02d}_{p.name}.failed.ir", self.text(module))
        self.rows.append(f"{self.step:02d}  {p.name}  failed  -")
        self._write("index.txt", "\n".join(self.rows) + "\n")

    def _write(self, name: str, text: str) -> None:
        with open(os.path.join(self.dir, name), "w", encoding="utf-8") as f:
            f.write(text)


class Timing(Instrumentation):
    """Wall time per pass, plus the parse/print/verify phases the tool records in the same timer."""

    def __init__(self, timer: Timer):
        self.timer = timer

    def before_pass(self, p, module):
        self._t0 = time.perf_counter()

    def after_pass(self, p, module):
        self.timer.add(f"pass {p.name}", time.perf_counter() - self._t0)

    def after_failed_pass(self, p, module, err):
        self.after_pass(p, module)


def timing_report(timer: Timer) -> str:
    total = sum(timer.totals.values()) or 1e-12
    lines = ["===-------------------------------------------------------------------------===", "  irforge timing"]
    lines.append(f"  Total: {total * 1e3:.3f} ms")
    lines.append(f"  {'ms':>10}  {'%':>6}  phase")
    for name, secs in timer.totals.items():
        lines.append(f"  {secs * 1e3:10.3f}  {100 * secs / total:6.1f}  {name}")
    return "\n".join(lines) + "\n"


REPRODUCER_HEADER = "// irforge-reproducer: pipeline = "


class Reproducer(Instrumentation):
    """On a pass failure, write the pipeline's input IR and the expanded pipeline into one file.

    The file is plain IR with the pipeline in a header comment; `irforge-opt --run-reproducer FILE` replays it.
    With a `path`, every failure writes it (`--crash-reproducer=FILE`); without one, only an internal error (a bug)
    does, to a fresh temporary file named on the error.
    """

    def __init__(self, path: str | None = None, stream=None):
        self.path = path
        self.stream = stream or sys.stderr

    def before_pipeline(self, module, pm):
        self._input = module.clone()  # printed only if a pass fails
        self._pipeline = pm.pipeline_text

    def after_failed_pass(self, p, module, err):
        if self.path is None and not isinstance(err, InternalError):
            return
        path = write_reproducer(print_module(self._input, debuginfo=True), self._pipeline, p.name, self.path)
        if isinstance(err, InternalError):
            err.reproducer = path
        else:
            self.stream.write(f"note: reproducer written to {path}\n")


def write_reproducer(ir_text: str, pipeline: str, failed_pass: str | None = None, path: str | None = None) -> str:
    """Write IR and the pipeline to run on it as one reproducer file (a fresh temporary one without `path`)."""
    import json
    import tempfile

    if path is None:
        fd, path = tempfile.mkstemp(prefix="irforge-reproducer-", suffix=".ir")
        os.close(fd)
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{REPRODUCER_HEADER}{json.dumps(pipeline)}\n")
        if failed_pass is not None:
            f.write(f"// failed in pass '{failed_pass}'\n")
        f.write(ir_text)
    return path
