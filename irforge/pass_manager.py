"""Passes and the pass manager.

A pass is a class in its own file under `passes/`:

    class TileBlockify(Pass):
        '''Split parallel axes into blocks x threads.'''      # first line: the summary (--list-passes, docs)

        name = "tile-blockify"
        input_level = "tile"                                 # the level it reads ("any" for generic passes)
        output_level = "tile"                                # the level it leaves (default: input_level)
        anchor = "kernel"                                    # the ops it runs on (default: the module)

        threads: int = option(256, domain=Pow2(32, 1024), help="threads per block")

        def check(self, op): ...                             # why these options cannot apply to `op` (None: they can)
        def run(self, op): ...                               # edit `op` in place; raise op.error(...) to fail

Options are typed fields with defaults and, where tunable, a declared domain. A kernel may override them with its
`tune = {tile-blockify = {threads = 128}}` attribute; the pass manager applies those, then calls `check` (a reason
is a located error: a refused option is never a silent no-op), then `run`. A pass explains its decisions with
`self.remark(op, "...")`: `irforge-opt -debug-only=NAME` and `irforge compile -v` show them.
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import inspect
import re
import time
import typing
from dataclasses import dataclass
from typing import ClassVar

from .diagnostics import InternalError, IRForgeError
from .dialect import LEVELS
from .ir import Operation
from .location import Location
from .printer import format_attr


# ---- option domains --------------------------------------------------------------------------------------------
class Domain:
    """The values a tunable option may take; the tuner enumerates `values()`."""

    def __contains__(self, v) -> bool:
        return v in self.values()

    def values(self) -> tuple:
        raise NotImplementedError


@dataclass(frozen=True)
class Choices(Domain):
    options: tuple

    def values(self) -> tuple:
        return tuple(self.options)

    def __str__(self) -> str:
        return "{" + ", ".join(map(str, self.options)) + "}"


@dataclass(frozen=True)
class Pow2(Domain):
    lo: int
    hi: int

    def __contains__(self, v) -> bool:
        return isinstance(v, int) and self.lo <= v <= self.hi and v & (v - 1) == 0

    def values(self) -> tuple:
        out, v = [], 1
        while v <= self.hi:
            if v >= self.lo:
                out.append(v)
            v *= 2
        return tuple(out)

    def __str__(self) -> str:
        return f"{self.lo}..{self.hi} pow2"


@dataclass(frozen=True)
class IntRange(Domain):
    lo: int
    hi: int
    step: int = 1

    def __contains__(self, v) -> bool:
        return isinstance(v, int) and self.lo <= v <= self.hi and (v - self.lo) % self.step == 0

    def values(self) -> tuple:
        return tuple(range(self.lo, self.hi + 1, self.step))

    def __str__(self) -> str:
        return f"{self.lo}..{self.hi}" + (f" step {self.step}" if self.step != 1 else "")


# ---- options ---------------------------------------------------------------------------------------------------
@dataclass
class Option:
    default: object
    domain: Domain | None = None
    help: str = ""
    name: str = ""  # as pipelines spell it: the field's name with dashes (`max_recompute` -> `max-recompute`)
    type: object = None  # set from the annotation
    attr: str = ""  # the pass's Python attribute holding the value

    def type_name(self) -> str:
        t = self.type
        if typing.get_origin(t) is tuple:
            return f"list[{typing.get_args(t)[0].__name__}]"
        return getattr(t, "__name__", str(t))

    def parse(self, text: str):
        """A value from its pipeline text (`64`, `true`, `a,b`); raises ValueError with a reason."""
        t = self.type
        if typing.get_origin(t) is tuple:
            elem = typing.get_args(t)[0]
            return tuple(_parse_scalar(elem, x) for x in text.split(",") if x != "")
        return _parse_scalar(t, text)

    def check(self, value):
        """`value` converted to the option's type and checked against its domain; raises ValueError."""
        t = self.type
        if typing.get_origin(t) is tuple:
            if not isinstance(value, tuple):
                value = (value,)
            elem = typing.get_args(t)[0]
            value = tuple(_coerce(elem, v) for v in value)
        else:
            value = _coerce(t, value)
        if self.domain is not None and value not in self.domain:
            raise ValueError(f"{format_value(value)} is outside its domain {self.domain}")
        return value


def _parse_scalar(t, text: str):
    if t is bool:
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        raise ValueError(f"expected true or false, got '{text}'")
    if t is int:
        try:
            return int(text, 0)
        except ValueError:
            raise ValueError(f"expected an integer, got '{text}'") from None
    if t is float:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"expected a number, got '{text}'") from None
    return text


def _coerce(t, v):
    if t is float and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    if (t is int and isinstance(v, bool)) or not isinstance(v, t):
        raise ValueError(f"expected {t.__name__}, got {_spelled(v)}")
    return v


def _spelled(v) -> str:
    """A value of the wrong type as an attribute spells it (a `tune`'s "16" is a string, [16] a list)."""
    try:
        return format_attr(v)
    except TypeError:  # a Python value (a pass built in Python) that no attribute spells
        return repr(v)


def format_value(v) -> str:
    """An option value as pipeline text (strings are quoted where the bare form would not read back)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple):
        return ",".join(format_value(x) for x in v) if v else '""'
    if isinstance(v, str) and (v == "" or re.search(r'[\s{}"]', v)):
        return f'"{v}"'
    return str(v)


def option(default, *, domain: Domain | None = None, help: str = "") -> typing.Any:
    """Declare a pass option: `threads: int = option(256, domain=Pow2(32, 1024), help="...")`."""
    return Option(default, domain, help)


# ---- passes ----------------------------------------------------------------------------------------------------
class Pass:
    name: ClassVar[str] = ""
    input_level: ClassVar[str] = "any"
    output_level: ClassVar[str | None] = None
    anchor: ClassVar[str] = "builtin.module"
    options: ClassVar[dict[str, Option]] = {}

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        opts = dict(getattr(cls, "options", {}))
        hints = typing.get_type_hints(cls) if inspect.get_annotations(cls) else {}
        for k, v in list(cls.__dict__.items()):
            if isinstance(v, Option):
                v.name, v.attr, v.type = k.replace("_", "-"), k, hints.get(k, type(v.default))
                try:
                    v.check(v.default)
                except ValueError as e:  # a bad default is the pass author's bug: fail at import, naming it
                    raise TypeError(f"pass {cls.name}: default of option '{v.name}': {e}") from None
                opts[v.name] = v
                delattr(cls, k)
        cls.options = opts
        for lvl in (cls.input_level, cls.output_level):
            if lvl is not None and lvl != "any" and lvl not in LEVELS:
                raise TypeError(f"pass {cls.name}: unknown level {lvl!r}")

    def __init__(self, **values):
        for opt in self.options.values():
            setattr(self, opt.attr, opt.default)
        for k, v in values.items():
            opt = self.options.get(k.replace("_", "-"))  # `max_recompute` and `max-recompute` name one option
            if opt is None:
                raise ValueError(f"pass '{self.name}' has no option '{k}'")
            setattr(self, opt.attr, opt.check(v))

    @classmethod
    def summary(cls) -> str:
        doc = (cls.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""

    @classmethod
    def leaves_level(cls) -> str:
        return cls.output_level or cls.input_level

    def option_values(self) -> dict:
        return {k: getattr(self, opt.attr) for k, opt in self.options.items()}

    def with_options(self, overrides) -> Pass:
        """A copy of this pass with some options replaced (e.g. a kernel's `tune` attribute)."""
        return type(self)(**{**self.option_values(), **dict(overrides)})

    def run(self, op: Operation) -> None:
        raise NotImplementedError

    def check(self, op: Operation) -> str | tuple[Operation, str] | None:
        """Why this pass, with these options, cannot apply to `op`: the reason, or (the op at fault, the reason);
        None when it can. The pass manager calls it before `run` and reports a reason as a located error; the tuner
        prunes with it."""
        return None

    def remark(self, op: Operation, message: str) -> None:
        """Say what this pass decided at `op` and why, above all why it declined ("staging skipped: the box (64 KB)
        exceeds the budget (32 KB)"). Instrumentations receive it (`-debug-only=NAME`, `irforge compile -v`);
        outside a pass manager it goes nowhere."""
        for ins in _LISTENERS.get():
            ins.remark(self, op, message)

    def text(self) -> str:
        """The pass as pipeline text, every option spelled out."""
        if not self.options:
            return self.name
        return self.name + "{" + " ".join(f"{k}={format_value(v)}" for k, v in self.option_values().items()) + "}"


# ---- running ---------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def frozen_heap():
    """Leave the objects alive on entry out of the garbage collector's passes until exit (`gc.freeze`).

    Passes allocate IR by the hundred thousand, which triggers full collections; each would scan everything alive,
    torch's modules and the exported program included (a quarter of a second per compile of a decoder layer), when
    the garbage is what the passes made. Nothing is lost: frozen objects go back to the collector on exit. A no-op
    inside another (nested pipelines, other threads' pipelines) and where the caller froze objects of its own (they
    stay frozen)."""
    global _freezes
    # `_freezes` first: gc.get_freeze_count() walks every frozen object (75 ms with torch loaded), which a tuner's
    # thousands of nested pipelines would pay each.
    if _freezes or not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    _freezes += 1
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        _freezes -= 1


_freezes = 0  # frozen_heap()s entered and not left, in any thread


class Instrumentation:
    """Hooks around each pass. Every debug flag (verify, print-ir-*, diff, tree dir, timing, reproducer) is one."""

    def before_pipeline(self, module: Operation, pipeline) -> None: ...

    def before_pass(self, p: Pass, module: Operation) -> None: ...

    def after_pass(self, p: Pass, module: Operation) -> None: ...

    def after_failed_pass(self, p: Pass, module: Operation, err: IRForgeError | InternalError) -> None: ...

    def remark(self, p: Pass, op: Operation, message: str) -> None: ...

    def after_pipeline(self, module: Operation) -> None: ...


# The instrumentations of the pass manager running now: where `Pass.remark` delivers.
_LISTENERS: contextvars.ContextVar[tuple[Instrumentation, ...]] = contextvars.ContextVar("listeners", default=())


class PassFailure(IRForgeError):
    """A pass (or the verifier after it) failed; the diagnostics say where in the IR."""

    def __init__(self, pass_name: str, cause: IRForgeError):
        super().__init__(cause.diagnostics)
        self.pass_name = pass_name


def anchored_ops(root: Operation, path: tuple[str, ...]) -> list[Operation]:
    """Ops reached from `root` by a nesting path of anchors (op names or aliases), outermost first."""
    ops = [root]
    for anchor in path:
        found = []
        for top in ops:
            _collect(top, anchor, found)
        ops = found
    return ops


def _matches(op: Operation, anchor: str) -> bool:
    return op.name == anchor or anchor in op.anchor_aliases


def _collect(op: Operation, anchor: str, out: list) -> None:
    for region in op.regions:
        for block in region.blocks:
            for inner in block.ops:
                if _matches(inner, anchor):
                    out.append(inner)
                else:
                    _collect(inner, anchor, out)


@dataclass
class ScheduledPass:
    """One pass of an expanded pipeline: the pass, its nesting path below the module, where it was written, and the
    named pipelines it came from (outermost first)."""

    pass_: Pass
    path: tuple[str, ...]
    loc: Location | None = None
    within: tuple[str, ...] = ()


class PassManager:
    def __init__(self, schedule: list[ScheduledPass], instrumentations=(), pipeline_text: str = ""):
        self.schedule = schedule
        self.instrumentations = list(instrumentations)
        self.pipeline_text = pipeline_text

    def run(self, module: Operation) -> None:
        token = _LISTENERS.set(tuple(self.instrumentations))
        try:
            with frozen_heap():
                self._run(module)
        finally:
            _LISTENERS.reset(token)

    def _run(self, module: Operation) -> None:
        for ins in self.instrumentations:
            ins.before_pipeline(module, self)
        for sp in self.schedule:
            p = sp.pass_
            for ins in self.instrumentations:
                ins.before_pass(p, module)
            try:
                self._run_one(sp, module)
                for ins in self.instrumentations:
                    ins.after_pass(p, module)
            except IRForgeError as e:
                for ins in self.instrumentations:
                    ins.after_failed_pass(p, module, e)
                raise e if isinstance(e, PassFailure) else PassFailure(p.name, e) from None
            except Exception as e:  # a bug in the pass, not the user's input
                err = e if isinstance(e, InternalError) else InternalError(f"in pass '{p.name}'", e)
                for ins in self.instrumentations:
                    ins.after_failed_pass(p, module, err)
                if err is e:
                    raise
                raise err from e
        for ins in self.instrumentations:
            ins.after_pipeline(module)

    def _run_one(self, sp: ScheduledPass, module: Operation) -> None:
        p = sp.pass_
        targets = anchored_ops(module, sp.path) if sp.path else [module]
        from .pipeline import tune_overrides

        for op in targets:
            overrides = tune_overrides(op).get(p.name)
            inst = p.with_options(overrides) if overrides else p
            why = inst.check(op)
            if why:
                at, reason = why if isinstance(why, tuple) else (op, why)
                raise at.error(reason)
            inst.run(op)


class Timer:
    """Wall time per named phase (parse, print, verify, each pass), in the order first seen."""

    def __init__(self):
        self.totals: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        self.totals[name] = self.totals.get(name, 0.0) + seconds

    def phase(self, name: str):
        timer = self

        class _Phase:
            def __enter__(self):
                self.t0 = time.perf_counter()

            def __exit__(self, *exc):
                timer.add(name, time.perf_counter() - self.t0)

        return _Phase()


def run_pipeline(module: Operation, pipeline: str, *, instrumentations=(), verify_each: bool = True) -> Operation:
    """Parse, check and run a pipeline on `module` (in place); returns the module."""
    from .instrumentation import VerifyEach
    from .pipeline import build_pass_manager

    pm = build_pass_manager(pipeline, module)
    pm.instrumentations = ([VerifyEach()] if verify_each else []) + list(instrumentations)
    pm.run(module)
    return module
