"""Measuring candidates: ranking and confirmation settings, static limits, a GPU worker with the kernel prepared."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from irforge.bench.case import FULL_TOLERANCE, HALF_TOLERANCE
from irforge.builtin import ModuleOp
from irforge.target import target

from . import cost
from .tuner_records import KernelFailed, KernelTask
from .worker import RemoteError, Worker, WorkerFailed

if TYPE_CHECKING:
    from .tuner import Tuner

RANK = {"reps": 20, "min_reps": 5, "warmup": 3, "max_seconds_per_case": 0.25}
CONFIRM = {"reps": 100, "min_reps": 10, "warmup": 10, "max_seconds_per_case": 2.0}
CONFIRM_FLOOR_S = 0.1  # the least a confirmation's timed runs get when the kernel's seconds are spent
# A point replaces the heuristic's only when the confirmation times it this much faster: the whole-seed84 run on an
# H100 (bench/results/tune-h100-2026-11-27b) kept winners 0-2% faster there that the suite then timed 4-7% slower
# (silu_mul's kernels, within the runs' own spread).
WIN_MARGIN = 0.03
FLUSH_S = 50e-6  # the L2 flush before each timed run


# ---- the static limits -----------------------------------------------------------------------------------------
def static_limit(compiled: dict, spill_bytes: int = 0) -> str | None:
    """Why a compiled point cannot run (or should not: it spills), from its CUBIN's counts; None when it can."""
    t = target()
    for k in compiled["kernels"]:
        threads = math.prod(k["block"])
        warps = -(-threads // t.warp_size)
        name = k["name"]
        if threads > t.max_threads:
            return f"{name}: {threads} threads per block (the limit is {t.max_threads})"
        smem = k.get("smem", 0) + k["dynamic_smem"]
        if smem > t.smem_per_block:
            return f"{name}: {smem} bytes of shared memory per block (the limit is {t.smem_per_block})"
        regs = -(-k.get("registers", 0) // 8) * 8 * warps * t.warp_size
        if regs > t.registers_per_sm:
            return f"{name}: {regs} registers per block (a multiprocessor has {t.registers_per_sm})"
        if k.get("stack_frame", 0) > spill_bytes:
            return f"{name}: spills to local memory ({k['stack_frame']} bytes of stack frame)"
    return None


def _predicted(features, compiled: dict) -> float | None:
    """The cost model's time for a compiled point: its schedule's features with its CUBIN's counts."""
    if features is None:
        return None
    regs = max((k.get("registers", 0) for k in compiled["kernels"]), default=0)
    smem = max((k.get("smem", 0) + k["dynamic_smem"] for k in compiled["kernels"]), default=0)
    return cost.seconds(features.with_compiled(regs, smem))


def tolerance(module: ModuleOp) -> float:
    """By the narrowest floating type the kernel writes (as the benchmark compares with eager)."""
    func = module.body.ops[0]
    outs = func.attributes["function_type"].outputs
    halves = any(getattr(getattr(t, "dtype", None), "bytes", 4) == 2 for t in outs)
    return HALF_TOLERANCE if halves else FULL_TOLERANCE


class _GpuSlot:
    """One GPU's worker and the kernel prepared in it (prepared again after each restart)."""

    def __init__(self, worker: Worker, tuner: Tuner):
        self.worker, self.tuner = worker, tuner
        self.prepared: tuple | None = None
        self.reference: tuple | None = None

    def prepare(self, task: KernelTask, reference_text: str, tol: float) -> None:
        self.reference = (task.key.hash, reference_text, tol)
        self._prepare()

    def _prepare(self) -> None:
        key, text, tol = self.reference
        fn = f"{self.tuner.o.measure_module}:prepare"
        try:
            res = self.worker.call(fn, key, text, tol, timeout=max(120.0, self.tuner.o.timeout * 4))
        except WorkerFailed as e:
            raise KernelFailed(f"the reference run failed ({e.kind}: {e.detail})") from None
        except RemoteError as e:
            raise KernelFailed(f"the reference run failed: {e}") from None
        if "seconds" not in res:
            if res.get("poisoned"):
                self.worker.stop()
            raise KernelFailed(f"the reference run failed: {res.get('detail')}")
        if not self.tuner.gpu_name:
            self.tuner.gpu_name = res.get("gpu", "")
        self.prepared = (key, self.worker.starts)

    def measure(self, task: KernelTask, programs: dict, settings: dict, timeout: float) -> dict:
        if self.prepared != (task.key.hash, self.worker.starts) or self.worker.proc is None:
            self._prepare()
        fn = f"{self.tuner.o.measure_module}:measure"
        try:
            res = self.worker.call(fn, task.key.hash, programs, settings, timeout=timeout)
        except WorkerFailed as e:
            return {n: {"status": e.kind, "detail": e.detail} for n in programs}
        except RemoteError as e:
            return {n: {"status": "error", "detail": str(e)} for n in programs}
        if "poisoned" in res:
            self.worker.stop()
            culprits = set(res["poisoned"].split(","))
            return {
                n: {"status": "fault", "detail": res["detail"]}
                if n in culprits
                else {"status": "error", "detail": "not measured: the device failed"}
                for n in programs
            }
        return res
