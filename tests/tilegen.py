"""Hypothesis strategies for the tile level: random loop programs with random schedules.

`loop_programs()` draws loop-level programs (random loop nests from `loopgen`, and random tensor programs, online
softmaxes and sibling reductions lowered with `tensor-to-loop`). `schedules()` draws a sequence of tile passes, in
any order and with any options, to run after `map-to-tile`: the passes must compose in every order. `schedule()`
runs one, and reports a pass's refusal (its `check`) instead of a result.
"""

from __future__ import annotations

import loopgen
import numpy as np
from hypothesis import strategies as st
from irforge.dialects import tile as T
from tensor_programs import tensor_programs

from irforge.builtin import FuncOp
from irforge.diagnostics import IRForgeError
from irforge.pass_manager import run_pipeline
from irforge.pipeline import module_level
from irforge.printer import print_module
from irforge.registry import registry

SCHEDULE_OPTIONS = {
    "tile-cooperative-reduce": ["", "{threads=1}", "{threads=2}", "{threads=4}", "{threads=64}"],
    "tile-blockify": ["", "{threads=1}", "{threads=2}", "{threads=4}", "{threads=32}"],
    "tile-vectorize": ["", "{width=1}", "{width=2}", "{width=4}"],
    "tile-stage-inputs": ["", "{max-bytes=4096}"],
    "tile-tma": ["", "{stages=all}"],
    "tile-pad-smem": ["", "{pad=4}"],
    "tile-swizzle-smem": ["", "{swizzle=1,2,3}"],
    "tile-rasterize": ["", "{rows=2}"],
    "tile-unroll": ["", "{max-ops=256}"],
}


@st.composite
def loop_programs(draw):
    module = draw(
        st.one_of(
            loopgen.programs(),
            tensor_programs(max_ops=5),
            loopgen.softmax_programs(),
            loopgen.sibling_programs(),
        )
    )
    if module_level(module) == "tensor":
        run_pipeline(module, "tensor-to-loop")
    return module


def runs_somewhere(module) -> bool:
    """A program that returns an input untouched (no kernel) has no level to interpret."""
    func = next(op for op in module.body.ops if isinstance(op, FuncOp))
    ret = func.body.ops[-1]
    return module_level(module) is not None and all(getattr(v, "op", None) is not None for v in ret.operands)


@st.composite
def schedules(draw, passes=tuple(SCHEDULE_OPTIONS)):
    """Some of the schedule passes, in any order, each with options from its domain."""
    chosen = draw(st.lists(st.sampled_from(passes), unique=True, max_size=len(passes)))
    order = draw(st.permutations(chosen)) if chosen else []
    return [name + draw(st.sampled_from(SCHEDULE_OPTIONS[name])) for name in order]


def schedule(module, passes: list[str]) -> str | None:
    """Run map-to-tile then `passes` on `module` (in place). None when all ran; otherwise the refusal message of the
    pass whose check refused (a refusal that no `check` predicted fails the test)."""
    run_pipeline(module, "map-to-tile")
    for text in passes:
        refused = apply(module, text)
        if refused:
            return refused
    return None


def apply(module, text: str) -> str | None:
    """Run one pass (`name{options}`) on `module`: None when it ran, else its refusal, which its `check` must have
    given for some kernel."""
    try:
        run_pipeline(module, text)
    except IRForgeError as e:
        name, _, opts = text.partition("{")
        values = dict(kv.split("=") for kv in opts.rstrip("}").split()) if opts else {}
        cls = registry().passes()[name]
        p = cls(**{k: cls.options[k].parse(v) for k, v in values.items()})
        reasons = [p.check(k) for k in module.walk() if isinstance(k, T.KernelOp)]
        assert any(reasons), f"'{text}' failed without its check refusing:\n{e.render()}"
        return str(e)
    return None


def assert_close(expected, got, module, what: str) -> None:
    half = any(t in print_module(module) for t in ("f16", "bf16"))
    tol = dict(rtol=2e-2, atol=2e-2) if half else dict(rtol=1e-4, atol=1e-5)
    for a, b in zip(expected, got, strict=True):
        np.testing.assert_allclose(
            np.asarray(b, np.float64), np.asarray(a, np.float64), equal_nan=True, err_msg=what, **tol
        )
