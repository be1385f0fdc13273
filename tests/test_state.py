"""Program state (a function's `state` attribute: memory that outlives a call, updated in place): the scatter that
updates it, through lifting and fusion, checked by the interpreters of every level that runs it; the verifier's
rules; the executor keeping it across calls and CUDA-graph replays (on a GPU)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from irforge.diagnostics import IRForgeError
from irforge.interpreter import interpret
from irforge.parser import parse_module
from irforge.runtime import has_gpu
from irforge.testing import check_pipeline

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))


def program(rows: int, k: int, width: int, read_after: bool) -> str:
    """A cache of `rows` rows updated at `k` positions; the function also returns the updated rows doubled, and
    (with `read_after`) reads the cache as it was on entry after the update."""
    t, u = f"f32[{rows},{width}]", f"f32[{k},{width}]"
    extra = f"  %old = tensor.elementwise neg %cache : {t}\n" if read_after else ""
    out = "%old" if read_after else "%twice"
    return (
        f'func.func @forward(%pos: i64[{k}], %new: {u}, %cache: {t}) -> ({t}, {t}) attributes {{state = ["c"]}} {{\n'
        f"  %c = tensor.scatter %new into %cache along 0 at %pos : {t}\n"
        f"  %twice = tensor.elementwise add %c, %c : {t}\n{extra}"
        f"  func.return {out}, %c\n}}\n"
    )


@SETTINGS
@given(
    st.integers(1, 9), st.integers(1, 4), st.data(), st.booleans(), st.sampled_from(["lift-to-loop", "tensor-to-loop"])
)
def test_scatter_into_state(rows, width, data, read_after, pipeline):
    """Lifting (in place, or a copy of the entry value first when it is read later) and the fusion pipeline give
    the tensor interpreter's results, the new state included."""
    k = data.draw(st.integers(1, rows))
    pos = np.array(data.draw(st.permutations(range(rows)))[:k])
    module = parse_module(program(rows, k, width, read_after))
    check_pipeline(module, pipeline, inputs={"pos": pos, "new": None, "cache": None}, seeds=(0, 1))


def test_state_keeps_what_the_update_does_not_write():
    """At the loop level the state's buffer starts as its argument: rows no scatter writes keep their values."""
    from irforge.pass_manager import run_pipeline

    module = parse_module(program(5, 2, 3, False))
    run_pipeline(module, "tensor-to-loop")
    cache = np.arange(15, dtype=np.float32).reshape(5, 3)
    new = -np.ones((2, 3), dtype=np.float32)
    _, state = interpret(module, [np.array([3, 1]), new, cache])
    want = cache.copy()
    want[[3, 1]] = -1
    np.testing.assert_array_equal(state, want)


def test_kernel_simulator_runs_state():
    """The kernel level's simulator: the state's buffer holds the state on entry, the kernel writes two rows."""
    from pathlib import Path

    text = (Path(__file__).parent / "lit" / "kernel-to-cuda" / "state.ir").read_text()
    module = parse_module(text)
    cache = np.arange(32, dtype=np.float32).reshape(8, 4)
    new = np.full((2, 4), -1.0, dtype=np.float32)
    y, state = interpret(module, [np.array([6, 2]), new, cache])
    want = cache.copy()
    want[[6, 2]] = -1
    np.testing.assert_array_equal(state, want)
    np.testing.assert_array_equal(y, new)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            'func.func @f(%x: f32[2], %s: f32[3]) -> f32[2] attributes {state = ["s"]} {\n  func.return %x\n}',
            "state 's' enters as f32[3] but leaves as f32[2]",
        ),
        (
            'func.func @f(%s: f32[2]) -> f32[2] attributes {state = ["a", "a"]} {\n  func.return %s\n}',
            "'state' names a state twice",
        ),
        (
            'func.func @f(%x: f32[4], %s: f32[4]) -> f32[4] attributes {state = ["s"]} {\n'
            "  %b = loop.buffer f32[4]\n"
            "  loop.kernel @w {\n    loop.for %i in 0..4 {\n      %v = loop.load %x[%i]\n"
            "      loop.store %b[%i] = %v\n    }\n  }\n"
            "  %o = loop.buffer f32[4]\n"
            "  loop.kernel @r {\n    loop.for %i in 0..4 {\n      %v = loop.load %s[%i]\n"
            "      loop.store %o[%i] = %v\n    }\n  }\n  func.return %b\n}",
            "reads state 's' on entry after kernel '@w' updated it in place",
        ),
    ],
)
def test_state_verifier(text, message):
    with pytest.raises(IRForgeError, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_module(text)


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs a CUDA GPU")
def test_executor_keeps_state_across_calls_and_graph_replays():
    import torch

    from irforge.pass_manager import run_pipeline
    from irforge.runtime import Executor

    module = parse_module(program(8, 1, 4, False))
    run_pipeline(module, "tensor-to-loop,loop-to-tile,tile-to-kernel,kernel-to-cuda")
    for graph in (False, True):
        ex = Executor(module, use_graph=graph)
        other = Executor(module)
        other.set_state(ex.state)  # one cache, two programs
        for row in range(8):
            runner = ex if row % 2 else other
            runner(torch.tensor([row]), torch.full((1, 4), float(row + 1)))
        want = torch.arange(1, 9, dtype=torch.float32, device="cuda")[:, None].expand(8, 4)
        torch.testing.assert_close(ex.state["c"], want)
