"""Stand-ins for the two sides of `irforge tune`'s workers (`irforge.tune.jobs`), run in the tuner's worker
processes by the tests (the tests put this folder on their PYTHONPATH).

`compile_point` is the real one with NVRTC left out (fixed resource counts: fast, and no CUBIN is needed: nothing
runs them). `prepare` and `measure` time nothing: a program's time comes from its launch shape, best at
`BEST_THREADS` threads per block (`FAKE_BEST_THREADS` moves it), so a search has a known best. With
`FAKE_RANK_LIES` the short ranking measurement shows every other launch shape 10x faster than it is (the longer
confirming one tells the truth), as noise can; with `FAKE_BEST_EDGE` every point takes 1 us but the best, which
takes that fraction of it. Planted failures, each once per run (a marker file in `FAKE_DIR`
remembers, as a real hung kernel would fail once): a program of `FAKE_HANG_THREADS` threads per block hangs, one of
`FAKE_DIE_THREADS` kills its process (as a fault takes the CUDA context down), one of `FAKE_WRONG_THREADS` returns a
wrong result.
"""

from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path

from irforge.tune.tuner_measure import CONFIRM

BEST_THREADS = 64


def compile_point(module_text: str, point: dict, pipeline: str, arch: str) -> dict:
    from irforge.runtime import cubin, nvrtc
    from irforge.tune import jobs

    nvrtc.resource_usage = lambda source, name, **kw: {name: cubin.ResourceUsage(32, 0, 0)}
    return jobs.compile_point(module_text, point, pipeline, arch)


def prepare(kernel: str, reference_text: str, tolerance: float) -> dict:
    return {"seconds": 0.0, "gpu": "fake"}


def threads_of(text: str) -> int:
    """Threads per block of the program's largest kernel (from the `cuda.kernel` lines' `block(...)`)."""
    blocks = re.findall(r"^cuda\.kernel .* block\(([\d, ]+)\)", text, re.M)
    return max((math.prod(int(x) for x in b.split(",")) for b in blocks), default=1)


def best_threads() -> int:
    return int(os.environ.get("FAKE_BEST_THREADS", BEST_THREADS))


def fake_seconds(threads: int) -> float:
    edge = os.environ.get("FAKE_BEST_EDGE")
    if edge:  # a flat landscape: the best point only this fraction of every other's time
        return (float(edge) if threads == best_threads() else 1.0) * 1e-6
    return (1 + abs(threads.bit_length() - best_threads().bit_length())) * 1e-6


def _first(what: str) -> bool:
    marker = Path(os.environ["FAKE_DIR"]) / what
    if marker.exists():
        return False
    marker.write_text("planted")
    return True


def measure(kernel: str, programs: dict, settings: dict) -> dict:
    if os.environ.get("FAKE_SPENDS_BUDGET"):  # a measurement spends its budget, as the real one's runs do
        with open(Path(os.environ["FAKE_DIR"]) / "budgets", "a") as f:
            f.write(f"{settings['reps']} {settings['max_seconds_per_case']}\n")
        time.sleep(settings["max_seconds_per_case"])
    out = {}
    for name, text in programs.items():
        threads = threads_of(text)
        if threads == int(os.environ.get("FAKE_HANG_THREADS", 0)) and _first("hang"):
            time.sleep(3600)
        if threads == int(os.environ.get("FAKE_DIE_THREADS", 0)) and _first("die"):
            os.kill(os.getpid(), 9)
        if threads == int(os.environ.get("FAKE_WRONG_THREADS", 0)) and _first("wrong"):
            out[name] = {"status": "wrong", "detail": "relative error 1.0e+00 over 1e-04"}
            continue
        seconds = fake_seconds(threads)
        if os.environ.get("FAKE_RANK_LIES") and settings["reps"] < CONFIRM["reps"] and threads != best_threads():
            seconds /= 10
        out[name] = {"status": "ok", "median_s": seconds, "reps": settings["reps"]}
    return out
