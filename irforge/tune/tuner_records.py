"""What a tuning run records of each kernel: the task, its measured candidates, its result."""

from __future__ import annotations

from dataclasses import dataclass, field

from irforge.builtin import ModuleOp
from irforge.pass_manager import ScheduledPass
from irforge.pipeline import schedule_text

from .db import Key

FAILED = ("wrong", "error", "fault", "timeout", "crash")


@dataclass
class KernelTask:
    """A distinct kernel to tune: its isolated loop-level module, the schedule that lowers it from there, and the
    names it goes by in the programs."""

    name: str
    module: ModuleOp
    schedule: list[ScheduledPass]
    key: Key
    uses: list[str] = field(default_factory=list)

    @property
    def pipeline(self) -> str:
        return schedule_text(self.schedule)


@dataclass
class Candidate:
    point: dict
    status: str  # ok, pruned, or one of FAILED
    median_s: float | None = None
    reps: int = 0
    detail: str = ""
    predicted_s: float | None = None
    phase: str = "rank"
    program: str = field(default="", repr=False)  # the cuda-level program measured (kept for the confirmation)

    def record(self) -> dict:
        return {
            "point": self.point,
            "status": self.status,
            "median_s": self.median_s,
            "reps": self.reps,
            "detail": self.detail,
            "phase": self.phase,
        }


@dataclass
class KernelResult:
    task: KernelTask
    status: str = "waiting"  # waiting, tuning, tuned, cached, failed, compiled (compile only)
    detail: str = ""
    space_size: int = 0
    decisions: int = 0
    candidates: list[Candidate] = field(default_factory=list)  # measured (ranking) and failed, in order
    confirmed: list[Candidate] = field(default_factory=list)
    pruned: int = 0  # compiled points over a static limit
    refused: int = 0  # values a pass's check refused in the tree
    merged: int = 0  # values that left the same IR as another
    unlikely: int = 0  # children and rollout leaves predicted past prune_ratio x the heuristic's time
    baseline: Candidate | None = None
    winner: Candidate | None = None
    seconds: float = 0.0
    reliable: bool = False  # the search trusted its prior (PUCT)

    @property
    def measured(self) -> int:
        return len(self.candidates)

    @property
    def failed(self) -> int:
        return sum(c.status in FAILED for c in self.candidates)

    def best(self) -> Candidate | None:
        ok = [c for c in self.candidates if c.status == "ok"]
        return min(ok, key=lambda c: c.median_s) if ok else None


class KernelFailed(Exception):
    pass
