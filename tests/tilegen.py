"""Hypothesis strategies for the tile level: random loop programs with random schedules.

`loop_programs()` draws loop-level programs (random loop nests from `loopgen`, and random tensor programs, online
softmaxes, sibling reductions and contractions with prologues and epilogues lowered with `tensor-to-loop`).
`schedules()` draws a sequence of tile passes, in any order and with any options, to run after `map-to-tile`: the
passes must compose in every order. `schedule()` runs one, and reports a pass's refusal (its `check`) instead of a
result.
"""

from __future__ import annotations

import loopgen
import numpy as np
from hypothesis import strategies as st
from irforge.dialects import tile as T

from irforge.builtin import FuncOp
from irforge.diagnostics import IRForgeError
from irforge.pass_manager import run_pipeline
from irforge.pipeline import module_level
from irforge.printer import print_module
from irforge.registry import registry
from irforge.testing import strategies

# The passes that schedule a contraction, in the pipeline's order, with option values under which they act on the
# small contractions of the tests (tiles dividing outputs of 8 x 8 upwards; the defaults tile only larger ones).
CONTRACTION_OPTIONS = {
    "tile-blockify": ["{bm=4 bn=4 threads=4}", "{bm=4 bn=4 threads=16}", "{bm=8 bn=4 threads=8}", "{bm=4 bn=8}"],
    "tile-register-tile": ["", "{tm=2 tn=2}", "{tm=1 tn=4}", "{tm=2 tn=1}"],
    "tile-chunk-reduce": ["", "{bk=2}", "{bk=4}"],
    "tile-stage-inputs": [""],
    "tile-multi-buffer": ["", "{stages=2}", "{stages=3}"],
    "tile-async-copy": [""],
    "tile-pipeline": ["", "{depth=1}"],
}
CONTRACTION_PASSES = tuple(CONTRACTION_OPTIONS)
# The schedule passes of `loop-to-tile` in its order, each with option values to draw from (from its domain).
SCHEDULE_OPTIONS = {
    "tile-cooperative-reduce": ["", "{threads=1}", "{threads=2}", "{threads=4}", "{threads=64}"],
    "tile-blockify": [
        "",
        "{threads=1}",
        "{threads=2}",
        "{threads=4}",
        "{threads=32}",
        "{bm=4 bn=4 threads=4}",
        "{bm=2 bn=8 threads=8}",
        "{bm=8 bn=2 threads=2}",
        "{bm=16 bn=16 threads=64}",
        "{bm=16 bn=16 threads=32}",
    ],
    "tile-tensorize": ["", "{atom=mma}", "{atom=none}"],
    "tile-register-tile": ["", "{tm=1 tn=1}", "{tm=2 tn=2}", "{tm=4 tn=1}", "{tm=1 tn=4}", "{tm=8 tn=8}"],
    "tile-permute-lanes": ["", "{rows=1 group-bytes=4}", "{rows=2}", "{group-bytes=8}"],
    "tile-chunk-reduce": ["", "{bk=1}", "{bk=2}", "{bk=4}", "{bk=8}"],
    "tile-split-reduce": [
        "",
        "{splits=1}",
        "{splits=2}",
        "{splits=4}",
        "{splits=2 via=atomics}",
        "{splits=4 via=partials}",
        "{splits=2 across=warps}",
        "{splits=4 across=warps}",
        "{splits=2 via=cluster}",
        "{splits=4 via=cluster}",
    ],
    "tile-vectorize": ["", "{width=1}", "{width=2}", "{width=4}"],
    "tile-stage-inputs": ["", "{max-bytes=4096}"],
    "tile-multi-buffer": ["", "{stages=1}", "{stages=2}", "{stages=3}"],
    "tile-tma": ["", "{stages=all}"],
    "tile-async-copy": [""],
    "tile-pipeline": ["", "{depth=1}", "{depth=2}"],
    "tile-warp-specialize": ["", "{producer=on}", "{producer=off}"],
    "tile-swizzle-smem": ["", "{swizzle=1,2,3}"],
    "tile-pad-smem": ["", "{pad=4}"],
    "tile-sink": [""],
    "tile-rasterize": ["", "{rows=2}"],
    "tile-longest-first": ["", "{order=off}"],
    "tile-unroll": ["", "{max-ops=256}"],
}


@st.composite
def loop_programs(draw):
    module = draw(
        st.one_of(
            strategies.loop_programs(),
            strategies.tensor_programs(max_ops=5),
            loopgen.softmax_programs(),
            loopgen.sibling_programs(),
            loopgen.contraction_programs(),
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
    """Some of the schedule passes, in any order (half the time in the pipeline's, where each pass finds what the
    ones before it made), each with options from its domain."""
    chosen = draw(st.lists(st.sampled_from(passes), unique=True, max_size=len(passes)))
    if draw(st.booleans()):
        order = sorted(chosen, key=list(SCHEDULE_OPTIONS).index)
    else:
        order = draw(st.permutations(chosen)) if chosen else []
    return [name + draw(st.sampled_from(SCHEDULE_OPTIONS[name])) for name in order]


@st.composite
def in_order(draw, options=SCHEDULE_OPTIONS, before: str | None = None, keep: int = 4):
    """Passes of `options` in the pipeline's order (those before the pass `before` only, when given), each with
    probability keep / (keep + 1), with option values from `options`: what a pass usually finds done."""
    order = list(SCHEDULE_OPTIONS)
    end = order.index(before) if before else len(order)
    chosen = [p for p in order[:end] if p in options and draw(st.integers(0, keep))]
    return [p + draw(st.sampled_from(options[p])) for p in chosen]


def schedule(module, passes: list[str]) -> str | None:
    """Run map-to-tile then `passes` on `module` (in place). None when all ran; otherwise the refusal message of the
    pass whose check refused. As in loop-to-tile, loop-dce goes first: loops that never run (extent 0) have no
    place at the tile level."""
    run_pipeline(module, "loop-dce,map-to-tile")
    for text in passes:
        refused = schedule_step(module, text)
        if refused is not None:
            return refused
    return None


def schedule_step(module, text: str) -> str | None:
    """Run one pass (pipeline text with options); None when it ran, its refusal message when its check refused (a
    failure that no `check` predicted fails the test)."""
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
