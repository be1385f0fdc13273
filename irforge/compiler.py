"""Compiling PyTorch programs: capture to the torch dialect, then lower level by level with named pipelines.

    prog = irforge.compile(model, *example_inputs, ir="tensor")
    print(prog)                  # the IR at that level
    prog.params                  # {name: array}: weights, buffers and captured constants
    outs = prog()                # the level's reference interpreter on the example inputs
    prog.check()                 # compared with PyTorch eager: one Comparison per output

`LOWERINGS` says how each level is reached from the torch level; adding a level is adding an entry (its pipeline
runs after the previous level's).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .diagnostics import IRForgeError, error
from .ir import Operation
from .location import UnknownLoc
from .printer import print_module

# level -> the named pipeline that lowers the previous level to it, in order from the top
LOWERINGS: dict[str, str] = {
    "torch": "",
    "tensor": "torch-to-tensor",
    "loop": "tensor-to-loop",
    "tile": "loop-to-tile",
    "kernel": "tile-to-kernel",
    "cuda": "kernel-to-cuda",
}


def levels() -> list[str]:
    return list(LOWERINGS)


def pipeline_to(level: str) -> str:
    """The pipeline text lowering freshly captured torch IR to `level`."""
    if level not in LOWERINGS:
        raise error(f"unknown level '{level}' (levels: {', '.join(LOWERINGS)})")
    steps = []
    for lvl, pipe in LOWERINGS.items():
        if pipe:
            steps.append(pipe)
        if lvl == level:
            break
    return ",".join(steps)


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


def compile(model, *example_inputs, ir: str = "tensor", instrumentations=()) -> Program:
    """Compile an `nn.Module` (or a function of tensors) on example inputs down to level `ir`."""
    from .frontend import from_module

    return compile_program(from_module(model, example_inputs), ir, instrumentations)


def params_in_use(module: Operation, params: dict) -> dict:
    """The entries of `params` that `module` reads: lowering drops params nothing reads (BatchNorm's
    `num_batches_tracked`), and the executor refuses params its program does not have."""
    used = {op.attributes["sym"].name for op in module.walk() if op.name.endswith(".param")}  # every level's param
    return {k: v for k, v in params.items() if k in used}


def compile_program(tp, ir: str = "tensor", instrumentations=()) -> Program:
    """Capture a `frontend.TorchProgram` and lower it to level `ir`."""
    from .dialects.torch.capture import capture, to_numpy
    from .pass_manager import run_pipeline

    pipeline = pipeline_to(ir)
    try:
        captured = capture(tp.model, tp.inputs, tp.input_names)
    except IRForgeError as e:
        if isinstance(e.loc, UnknownLoc):  # about the program as a whole: point at the user's expression
            e.diagnostics[0].loc = tp.where
        raise
    func = captured.module.body.ops[0]  # the captured function; lower levels put kernels before it
    names = [a.name_hint for a in func.body.args]
    if pipeline:
        run_pipeline(captured.module, pipeline, instrumentations=instrumentations)
    return Program(
        module=captured.module,
        level=ir,
        params=params_in_use(captured.module, captured.params),
        input_names=names,
        inputs=[to_numpy(t) for t in tp.inputs],
        expected=[to_numpy(t) for t in tp.outputs] + [to_numpy(tp.buffers_after[n]) for n in captured.state],
        state=captured.state,
    )
