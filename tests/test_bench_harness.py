"""The bench harness on the CPU with a fake clock: checks before timing, wrong and failing systems never timed,
interleaved runs, runs planned within the case's budget, a device failure ending the run."""

from __future__ import annotations

import itertools

import pytest
import torch

from irforge.bench import harness, ops
from irforge.bench.case import Case, Input
from irforge.bench.harness import Settings, System, Timer, plan_reps, run_suite
from irforge.diagnostics import error


class FakeTimer(Timer):
    """Each timed call of system `name` takes the next of `ms[name]` (cycled); calls are logged."""

    def __init__(self, ms: dict[str, list[float]]):
        self.ms = {n: itertools.cycle(v) for n, v in ms.items()}
        self.calls: list[str] = []
        self._times: dict[str, list[float]] = {}

    def _record(self, name, fn):
        fn()
        self.calls.append(name)
        self._times.setdefault(name, []).append(next(self.ms[name]))

    def _collect(self):
        out, self._times = self._times, {}
        return out


def small_case(cid="t.softmax", family="softmax", fn=ops.softmax, shape=(4, 8)) -> Case:
    return Case(cid, family, (Input("x", shape, torch.float32),), 0, fn=fn)


SYSTEMS = [
    harness.eager(),
    System("good", lambda case, program: program),
    System("wrong", lambda case, program: lambda x: program(x) + 1),
    System("broken", lambda case, program: (_ for _ in ()).throw(error("cannot compile this"))),
]
CPU = Settings(reps=5, min_reps=2, warmup=1, max_seconds_per_case=10.0, device="cpu")


def test_compare_checks_values_shapes_and_nans():
    ref = torch.randn(64, 64)
    assert harness.compare(ref + 1e-7, ref, 1e-4)[0]
    ok, err, why = harness.compare(ref * 1.01, ref, 1e-4)
    assert not ok and err == pytest.approx(0.01, rel=1e-3) and "over 1e-04" in why
    assert harness.compare((ref * 1.01).bfloat16(), ref.bfloat16(), 2e-2)[0]
    assert "shape" in harness.compare(ref[:2], ref, 1e-4)[2]
    assert "2 outputs" in harness.compare((ref, ref), ref, 1e-4)[2]
    nan = ref.clone()
    nan[3, 3] = float("nan")
    assert harness.compare(nan, ref, 1e-4)[2] == "NaN in output"


def test_wrong_and_failing_systems_are_recorded_and_never_timed():
    timer = FakeTimer({"eager": [2.0, 4.0, 3.0], "good": [1.0], "wrong": [9.0], "broken": [9.0]})
    (row,) = run_suite([small_case()], SYSTEMS, timer, CPU)
    e = row["systems"]
    assert e["eager"]["status"] == "ok" and e["good"]["status"] == "ok"
    assert e["wrong"]["status"] == "wrong" and e["wrong"]["detail"].startswith("relative error")
    assert e["broken"] == {"status": "error", "detail": "error: cannot compile this"}
    assert {"wrong", "broken"}.isdisjoint(timer.calls)
    # one planning call each, then 5 interleaved rounds: eager, good, eager, good, ...
    assert timer.calls == ["eager", "good"] + ["eager", "good"] * 5
    # the eager times after the planning call (2.0) are 4, 3, 2, 4, 3: median 3
    assert e["eager"]["median_ms"] == 3.0 and e["eager"]["reps"] == 5
    assert e["good"]["median_ms"] == 1.0 and "median_ms" not in e["wrong"]


def test_case_rows_carry_what_the_report_needs():
    (row,) = run_suite([small_case()], SYSTEMS[:2], FakeTimer({"eager": [2.0], "good": [1.0]}), CPU)
    assert row["id"] == "t.softmax" and row["family"] == "softmax" and row["dtype"] == "f32"
    assert row["bytes"] == 2 * 4 * 8 * 4  # input read, output written
    assert row["tolerance"] == 1e-4 and row["shapes"] == "x[4,8] f32"


def test_plan_reps_shares_the_budget_cheapest_first():
    # the cheap system takes its 100 runs (0.1 s); the slow one gets what fits in the rest: 2.9 s / 0.2 s
    assert plan_reps({"eager": 1.0, "irforge": 200.0}, 100, 3.0, 3) == {"eager": 100, "irforge": 14}
    assert plan_reps({"eager": 1.0, "irforge": 5000.0}, 100, 3.0, 3) == {"eager": 100, "irforge": 3}
    assert plan_reps({"a": 0.01, "b": 0.02}, 100, 3.0, 3) == {"a": 100, "b": 100}
    # two slow systems split it evenly
    assert plan_reps({"a": 100.0, "b": 100.0}, 100, 3.0, 3) == {"a": 15, "b": 15}


def test_slow_systems_get_fewer_runs_within_the_case_budget():
    timer = FakeTimer({"eager": [1.0], "good": [200.0]})
    settings = Settings(reps=100, min_reps=3, warmup=1, max_seconds_per_case=3.0, device="cpu")
    (row,) = run_suite([small_case()], SYSTEMS[:2], timer, settings)
    assert row["systems"]["eager"]["reps"] == 100 and row["systems"]["good"]["reps"] == 14
    assert timer.calls.count("good") == 15  # one to plan, 14 timed


def test_a_missing_package_skips_the_case():
    case = small_case()
    case.requires = "a_package_that_is_not_installed"
    (row,) = run_suite([case], SYSTEMS[:2], FakeTimer({}), CPU)
    assert row["systems"]["good"] == {"status": "skipped", "detail": "skipped: needs a_package_that_is_not_installed"}
    assert row["bytes"] is None


def test_a_device_failure_ends_the_run_and_marks_the_rest(monkeypatch):
    def crash(case, program):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(harness, "device_alive", lambda device: False)
    cases = [small_case("a"), small_case("b"), small_case("c")]
    rows = run_suite(cases, [harness.eager(), System("irforge", crash)], FakeTimer({"eager": [1.0]}), CPU)
    assert [r["id"] for r in rows] == ["a", "b", "c"]
    assert rows[0]["systems"]["irforge"]["status"] == "error"
    assert "device failed: a: irforge: RuntimeError: CUDA error" in rows[0]["systems"]["irforge"]["detail"]
    assert all(e["status"] == "not run" for r in rows[1:] for e in r["systems"].values())


def test_the_log_keeps_a_crash_trace_and_a_diagnostic_line():
    """The log behind the error rows: a crash's traceback, but a diagnostic (an option a pass refuses) as its one
    line, which says all there is."""

    def crash(case, program):
        raise ValueError("boom")

    lines: list[str] = []
    systems = [harness.eager(), SYSTEMS[3], System("crash", crash)]
    run_suite([small_case()], systems, FakeTimer({"eager": [1.0]}), CPU, log=lines.append)
    broken, crashed = (next(m for m in lines if f": {name} failed: " in m) for name in ("broken", "crash"))
    assert broken.endswith("cannot compile this") and "Traceback" not in broken
    assert "ValueError: boom" in crashed and "Traceback" in crashed


def test_an_error_keeps_the_run_going():
    def sometimes(case, program):
        if case.id == "a":
            raise ValueError("boom")
        return program

    cases = [small_case("a"), small_case("b")]
    rows = run_suite(cases, [harness.eager(), System("x", sometimes)], FakeTimer({"eager": [1.0], "x": [1.0]}), CPU)
    assert rows[0]["systems"]["x"] == {"status": "error", "detail": "ValueError: boom"}
    assert rows[1]["systems"]["x"]["status"] == "ok"


def test_error_lines_name_files_relative_to_the_checkout():
    import irforge

    here = irforge.__file__
    line = harness.first_line(ValueError(f"in {here}: bad"))
    assert line == "ValueError: in irforge/__init__.py: bad"


def test_a_bug_in_a_system_is_an_error_row_not_the_end_of_the_run():
    odd = System("odd", lambda case, program: lambda x: None)  # returns no tensor: the check itself fails
    rows = run_suite([small_case("a"), small_case("b")], [harness.eager(), odd], FakeTimer({"eager": [1.0]}), CPU)
    assert [r["id"] for r in rows] == ["a", "b"]
    assert all(r["systems"]["odd"]["status"] == "error" for r in rows)
    assert rows[0]["systems"]["odd"]["detail"].startswith("AttributeError:")
