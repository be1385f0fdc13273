"""Guards for irforge's own compile time, which `bench/compile_latency.py` measures (no test here times anything):
passes run with the heap alive before them left out of the garbage collector's passes, and the bank model works
out the layout-independent half of a stage once per decision, however many layouts it weighs."""

from __future__ import annotations

import gc

from irforge.passes.tile import banks, banks_layouts
from test_smem_banks import ROWS, _stage

from irforge.parser import parse_module
from irforge.pass_manager import Pass, PassManager, ScheduledPass, frozen_heap

TEXT = """func.func @f(%a: f32) -> f32 {
  func.return %a
}
"""


def test_passes_run_with_the_heap_frozen_and_thawed_after():
    seen = []

    class Probe(Pass):
        name = "test-freeze-probe"

        def run(self, op):
            seen.append(gc.get_freeze_count())

    assert gc.get_freeze_count() == 0
    PassManager([ScheduledPass(Probe(), ())]).run(parse_module(TEXT))
    assert seen[0] > 0 and gc.get_freeze_count() == 0


def test_nested_pipelines_do_not_count_the_frozen_objects(monkeypatch):
    """gc.get_freeze_count() walks every frozen object (75 ms with torch loaded): a pipeline run inside another
    (apply-tuning's, the tuner's thousands) must not ask it while the outer one holds the heap frozen."""
    import irforge.pass_manager as pm

    counted = []
    real = gc.get_freeze_count
    monkeypatch.setattr(pm.gc, "get_freeze_count", lambda: counted.append(real()) or counted[-1])

    class Nested(Pass):
        name = "test-nested-pipeline"

        def run(self, op):
            for _ in range(3):
                with frozen_heap():
                    pass

    PassManager([ScheduledPass(Nested(), ())]).run(parse_module(TEXT))
    assert counted == [0] and real() == 0  # asked once, on entry, with nothing frozen; thawed after


def test_a_caller_frozen_heap_stays_frozen():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        # frozen objects freed meanwhile (a finalizer, a weakref callback) only lower the count: neither frozen more
        # nor thawed
        with frozen_heap():
            assert 0 < gc.get_freeze_count() <= frozen
        assert 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def test_a_decision_works_out_each_loads_threads_once(monkeypatch):
    stage = _stage(ROWS)  # one load; its 32-byte rows conflict, so every layout is weighed
    calls = []
    real = banks._thread_layout
    monkeypatch.setattr(banks, "_thread_layout", lambda *a: calls.append(a) or real(*a))
    _, _, tried = banks_layouts.choose(stage, [{"pad": p} for p in (1, 2, 4)] + [{"swizzle": (1, 2, 3)}])
    assert len(tried) == 4 and len(calls) == 1
