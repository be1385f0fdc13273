"""Compiling PyTorch programs: capture to the torch dialect, then lower level by level with named pipelines.

    prog = irforge.compile(model, *example_inputs, ir="tensor")
    print(prog)                  # the IR at that level
    prog.params                  # {name: array}: weights, buffers and captured constants
    outs = prog()                # the level's reference interpreter on the example inputs
    prog.check()                 # compared with PyTorch eager: one Comparison per output

The lowering is the named pipeline `torch-to-cuda` (pipelines/torch-to-cuda.pipeline), one step per level: lowering
to a level runs its steps up to the one that reaches that level. `pipeline=` replaces it; `after=` and `before=`
run more passes at named points of it (`after={"loop-to-tile": "my-pass"}`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .diagnostics import IRForgeError, error
from .dialect import LEVELS
from .ir import Operation
from .location import UnknownLoc
from .pass_manager import ScheduledPass
from .printer import print_module

LOWERING = "torch-to-cuda"  # the named pipeline from captured torch IR to CUDA


def lowering(
    level: str | None = "cuda", *, pipeline: str | None = None, after=None, before=None, tuning: str | None = None
) -> list[ScheduledPass]:
    """The passes that lower freshly captured torch IR: `pipeline` when given, else the default lowering cut after
    the step that reaches `level`. `after` and `before` ({point: pipeline}) run pipelines after or before every
    place a pass or named pipeline of that lowering (`tile-blockify`, `loop-to-tile`) runs. `tuning` (a tuning
    database's path; "" for the default one) replays tuned schedules: `apply-tuning` runs where kernels are formed."""
    from .pipeline import check_levels, expand, parse_pipeline

    if pipeline is not None:
        schedule = expand(parse_pipeline(pipeline), "<pass-pipeline>")
    else:
        if level not in LEVELS:
            raise error(f"unknown level '{level}' (levels: {', '.join(LEVELS)})")
        schedule = _cut(expand(parse_pipeline(LOWERING, f"<{LOWERING}>"), f"<{LOWERING}>"), level)
    for where, points in (("after", after or {}), ("before", before or {})):
        for point, text in points.items():
            schedule = _insert(schedule, where, point, text, level if pipeline is None else None)
    if tuning is not None and pipeline is None:
        schedule = _with_tuning(schedule, tuning, after, before)
    check_levels(schedule, "torch")
    return schedule


def _with_tuning(schedule: list[ScheduledPass], db: str, after, before) -> list[ScheduledPass]:
    from .registry import registry
    from .tune.space import space_version, split_lowering, tuning_point

    at = tuning_point(schedule)
    if at is None:
        return schedule  # never gets to where kernels are formed
    _, suffix = split_lowering(after, before)
    apply = registry().pass_class("apply-tuning")(db=db, version=space_version(suffix))
    return [*schedule[:at], ScheduledPass(apply, ()), *schedule[at:]]


def _cut(schedule: list[ScheduledPass], level: str) -> list[ScheduledPass]:
    """The steps of the lowering (its top-level elements) up to the one that leaves the IR at `level`."""
    out, cur = [], "torch"
    for _, step in _steps(schedule):
        if cur == level:
            break
        out += step
        cur = next((sp.pass_.leaves_level() for sp in reversed(step) if sp.pass_.leaves_level() != "any"), cur)
    return out


def _steps(schedule: list[ScheduledPass]):
    """(name, passes) for each top-level element of the lowering: a named pipeline it includes, or a pass."""
    step: list[ScheduledPass] = []
    for sp in schedule:
        name = sp.within[1] if len(sp.within) > 1 else sp.pass_.name
        if step and (name != step[0][0] or len(sp.within) < 2):
            yield step[0][0], [x for _, x in step]
            step = []
        step.append((name, sp))
    if step:
        yield step[0][0], [x for _, x in step]


def _insert(schedule: list[ScheduledPass], where: str, point: str, text: str, level: str | None):
    """`schedule` with the pipeline `text` run after (or before) each run of consecutive passes that are, or come
    from, `point`."""
    from .pipeline import _suggest, expand, parse_pipeline

    source = f"<--{where} {point}>"
    extra = expand(parse_pipeline(text, source), source)
    hits = [i for i, sp in enumerate(schedule) if point == sp.pass_.name or point in sp.within]
    if not hits:
        names = list(dict.fromkeys(n for sp in schedule for n in (*sp.within[1:], sp.pass_.name)))
        what = f"the lowering to the {level} level" if level else "the pipeline"
        raise error(f"--{where} {point}: {what} runs no pass or pipeline '{point}'{_suggest(point, names)}")
    runs = (
        [i for k, i in enumerate(hits) if (k == 0 or hits[k - 1] != i - 1)]
        if where == "before"
        else [i + 1 for k, i in enumerate(hits) if k == len(hits) - 1 or hits[k + 1] != i + 1]
    )
    out, last = [], 0
    for at in runs:
        out += schedule[last:at] + list(extra)
        last = at
    return out + schedule[last:]


@dataclass
class Program:
    """A compiled program: its IR at one level, its param store, example inputs and PyTorch's outputs on them."""

    module: Operation
    level: str
    params: dict[str, np.ndarray]
    input_names: list[str]
    inputs: list[np.ndarray]
    expected: list[np.ndarray] = field(default_factory=list)
    state: dict[str, np.ndarray] = field(default_factory=dict)  # the state's values before the example run

    def __str__(self) -> str:
        return print_module(self.module)

    def __call__(self, *inputs) -> list[np.ndarray]:
        """Run the level's reference interpreter (on the example inputs and initial state when none are given)."""
        from .interpreter import entry_function, interpret

        if not inputs:
            state = [self.state[n] for n in entry_function(self.module).state_names()] if self.state else []
            inputs = (*self.inputs, *state)
        return interpret(self.module, list(inputs), self.params)

    def check(self) -> list:
        """The interpreter's outputs compared with PyTorch eager's, one `testing.Comparison` per output."""
        from .testing import compare_outputs, output_types

        return compare_outputs(self(), self.expected, output_types(self.module))


def compile(
    model,
    *example_inputs,
    ir: str = "tensor",
    pipeline: str | None = None,
    after=None,
    before=None,
    instrumentations=(),
    tuning: str | None = None,
) -> Program:
    """Compile an `nn.Module` (or a function of tensors) on example inputs down to level `ir`, or through
    `pipeline` (pipeline text run on the captured torch IR). `after` / `before`: {point: pipeline} insert passes
    (plugins' included) into the default lowering: `after={"loop-to-tile": "my-pass"}`. `tuning`: replay the
    tuned schedules of that tuning database ("" for the default one; `irforge tune` fills it)."""
    from .frontend import from_module

    tp = from_module(model, example_inputs)
    return compile_program(tp, ir, instrumentations, pipeline=pipeline, after=after, before=before, tuning=tuning)


def params_in_use(module: Operation, params: dict) -> dict:
    """The entries of `params` that `module` reads: lowering drops params nothing reads (BatchNorm's
    `num_batches_tracked`), and the executor refuses params its program does not have."""
    used = {op.attributes["sym"].name for op in module.walk() if op.name.endswith(".param")}  # every level's param
    return {k: v for k, v in params.items() if k in used}


def compile_program(
    tp,
    ir: str | None = "tensor",
    instrumentations=(),
    *,
    pipeline=None,
    after=None,
    before=None,
    bisect=False,
    tuning=None,
):
    """Capture a `frontend.TorchProgram` and lower it (see `lowering`); `bisect`: run each pass's output through its
    level's reference interpreter on the program's inputs and stop at the first that differs from PyTorch eager."""
    from .dialects.torch.capture import capture, to_numpy
    from .instrumentation import VerifyEach
    from .pass_manager import PassManager
    from .pipeline import module_level, schedule_text

    schedule = lowering(ir, pipeline=pipeline, after=after, before=before, tuning=tuning)
    try:
        captured = capture(tp.model, tp.inputs, tp.input_names)
    except IRForgeError as e:
        if isinstance(e.loc, UnknownLoc):  # about the program as a whole: point at the user's expression
            e.diagnostics[0].loc = tp.where
        raise
    func = captured.module.body.ops[0]  # the captured function; lower levels put kernels before it
    names = [a.name_hint for a in func.body.args]
    inputs = [to_numpy(t) for t in tp.inputs]
    expected = [to_numpy(t) for t in tp.outputs] + [to_numpy(tp.buffers_after[n]) for n in captured.state]
    hooks = [VerifyEach(), *instrumentations]
    if bisect:
        from .testing import NumericsCheck

        hooks.append(NumericsCheck(bisect=True, inputs=inputs, params=captured.params, expected=expected))
    PassManager(schedule, hooks, schedule_text(schedule)).run(captured.module)
    return Program(
        module=captured.module,
        level=module_level(captured.module) or "torch",
        params=params_in_use(captured.module, captured.params),
        input_names=names,
        inputs=inputs,
        expected=expected,
        state=captured.state,
    )
