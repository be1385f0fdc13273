"""A stand-in for the GPU side of `irforge tune` (`irforge.tune.jobs.prepare` and `measure`), run in the tuner's
worker processes by the tests: times come from the launch shape in each program, so a search has a known best;
a program launched with `FAKE_HANG_THREADS` threads per block hangs and one with `FAKE_DIE_THREADS` kills its
process, as a hung or faulting kernel would."""

from __future__ import annotations

import math
import os
import re
import time

BEST_THREADS = 64


def prepare(kernel: str, reference_text: str, tolerance: float) -> dict:
    return {"seconds": 0.0, "gpu": "fake"}


def threads_of(text: str) -> int:
    """Threads per block of the program's largest kernel (from the `cuda.kernel` lines' `block(...)`)."""
    sizes = [
        math.prod(int(x) for x in b.split(",")) for b in re.findall(r"^cuda\.kernel .* block\(([\d, ]+)\)", text, re.M)
    ]
    return max(sizes, default=1)


def fake_seconds(threads: int) -> float:
    return (1 + abs(threads.bit_length() - BEST_THREADS.bit_length())) * 1e-6


def measure(kernel: str, programs: dict, settings: dict) -> dict:
    out = {}
    for name, text in programs.items():
        threads = threads_of(text)
        if threads == int(os.environ.get("FAKE_HANG_THREADS", 0)):
            time.sleep(3600)
        if threads == int(os.environ.get("FAKE_DIE_THREADS", 0)):
            os.kill(os.getpid(), 9)
        out[name] = {"status": "ok", "median_s": fake_seconds(threads), "reps": settings["reps"]}
    return out
