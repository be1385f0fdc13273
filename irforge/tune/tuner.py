"""The tuning run: kernels in, winners out (into the database).

For each distinct kernel (by key; one already in the database is not tuned again unless asked):

1. its space (`space.Space`) and a search over it (`mcts.SPMCTS`, seeded from the run's seed and the kernel's key);
2. the *reference* (the kernel lowered with none of the decisions' passes: one thread per output point, the schedule
   least likely to be wrong) and the *baseline* (the pipeline's own values: what `compile` does untuned) are
   compiled first; the GPU worker makes the inputs and the reference outputs, then measures the baseline: if either
   fails the kernel is not tuned (the run goes on);
3. leaves the search proposes are compiled in a pool of CPU worker processes (passes, NVRTC, the CUBIN's counts) ahead
   of the GPU; a compiled point over a static limit (threads, shared memory, registers per block, spills) is pruned
   there, before any GPU time; the rest are measured one at a time in the GPU worker (a short run: the median of a
   few, L2 flushed) and their times go back to the search, in the order the leaves were proposed (so a run is
   reproducible from its seed, whatever order compiles finish in). Points whose schedules come out identical are
   measured once;
4. it stops at the budget (measured candidates), the time (leaving room for the rest), or when `patience`
   candidates in a row brought no 1 % gain (or the space is exhausted); the best few and the baseline are then
   measured together, longer (`confirm`), and the fastest of those is the winner if it beats the baseline by
   `WIN_MARGIN` there, else the baseline: never slower than it, never a winner by noise.

A candidate that hangs, faults or computes a wrong result costs that candidate: it is recorded with its status and
the worker restarts. `--gpus N` tunes N kernels at once, one worker per GPU. Without a GPU (`compile_only`) the
same search runs with the cost model's predictions as times: it fills the NVRTC cache with the candidates a GPU run
will most likely ask for.
"""

from __future__ import annotations

import math
import os
import queue
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from irforge.builtin import ModuleOp
from irforge.pass_manager import ScheduledPass
from irforge.pipeline import schedule_text
from irforge.printer import print_module
from irforge.target import target

from . import cost
from .db import Entry, Key, TuneDB
from .mcts import SPMCTS
from .space import Space, digest, kernel_key, space_version
from .tuner_measure import (
    CONFIRM,
    CONFIRM_FLOOR_S,
    FLUSH_S,
    RANK,
    WIN_MARGIN,
    _GpuSlot,
    _predicted,
    static_limit,
    tolerance,
)
from .tuner_records import Candidate, KernelFailed, KernelResult, KernelTask
from .tuner_tree import _Tree
from .worker import RemoteError, Worker, WorkerFailed

AHEAD = 4  # candidates compiling while the GPU measures


@dataclass
class Options:
    budget: int = 200  # measured candidates per kernel (failures included)
    seconds: float = 60.0  # per kernel, the confirmation included
    patience: int = 60  # candidates in a row without a 1 % gain
    seed: int = 0
    confirm: int = 4  # best candidates measured again, longer, with the baseline
    gpus: int = 1
    jobs: int = 0  # compile processes (0: one per CPU core)
    arch: str = ""  # "" : the target's
    timeout: float = 20.0  # seconds a measurement may take before its candidate counts as hung
    compile_only: bool = False
    retune: bool = False
    spill_bytes: int = 0  # bytes of stack frame (spilled registers) a point may have before it is pruned
    prune_ratio: float = 4.0  # points predicted this many times the heuristic's time are not measured
    measure_module: str = "irforge.tune.jobs"  # what the GPU workers run (prepare, measure)
    compile_module: str = "irforge.tune.jobs"  # what the CPU workers run (compile_point)
    worker_env: dict = field(default_factory=dict)


# ---- the run ---------------------------------------------------------------------------------------------------
class Tuner:
    def __init__(self, db: TuneDB | None, options: Options, display=None):
        self.db = db
        self.o = options
        self.display = display
        self.arch = options.arch or target().arch
        self._workers: list[Worker] = []
        self._gpus: list[_GpuSlot] = []
        self._lock = threading.Lock()
        self._local = threading.local()
        self.jobs = options.jobs or os.cpu_count() or 1
        self.pool = ThreadPoolExecutor(max_workers=self.jobs)
        self.gpu_name = ""

    def key(self, module: ModuleOp, schedule: list[ScheduledPass]) -> Key:
        return Key(kernel_key(module), self.arch, space_version(schedule))

    def close(self) -> None:
        self.pool.shutdown(cancel_futures=True)
        for w in self._workers:
            w.stop()

    # ---- workers ------------------------------------------------------------------------------------------------
    def _compile_worker(self) -> Worker:
        w = getattr(self._local, "worker", None)
        if w is None:
            w = self._local.worker = Worker(self.o.worker_env, name=f"compile{threading.get_ident()}")
            with self._lock:
                self._workers.append(w)
        return w

    def _compile(self, module_text: str, point: dict, pipeline: str) -> dict:
        try:
            return self._compile_worker().call(
                f"{self.o.compile_module}:compile_point", module_text, point, pipeline, self.arch, timeout=600
            )
        except (WorkerFailed, RemoteError) as e:
            return {"error": f"the compiler failed: {e}"}

    def _gpu_slot(self, index: int) -> _GpuSlot:
        with self._lock:
            while len(self._gpus) <= index:
                self._gpus.append(_GpuSlot(self._gpu_worker(len(self._gpus)), self))
            return self._gpus[index]

    def _gpu_worker(self, index: int) -> Worker:
        env = dict(self.o.worker_env)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        devices = visible.split(",") if visible else [str(i) for i in range(self.o.gpus)]
        env["CUDA_VISIBLE_DEVICES"] = devices[index % len(devices)]
        w = Worker(env, name=f"gpu{index}")
        self._workers.append(w)
        return w

    # ---- kernels ------------------------------------------------------------------------------------------------
    def run(self, tasks: list[KernelTask]) -> list[KernelResult]:
        results = [KernelResult(t) for t in tasks]
        todo: queue.Queue = queue.Queue()
        for r in results:
            entry = self.db.entry(r.task.key) if self.db and not self.o.compile_only else None
            if entry is not None and entry.best_s is not None and not self.o.retune:
                r.status, r.detail = "cached", f"tuned before ({entry.tuned_at}, {entry.name})"
            else:
                todo.put(r)
            self._show(r)
        lanes = 1 if self.o.compile_only else max(1, self.o.gpus)
        threads = [threading.Thread(target=self._lane, args=(i, todo), daemon=True) for i in range(lanes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results

    def _lane(self, index: int, todo: queue.Queue) -> None:
        gpu = None if self.o.compile_only else self._gpu_slot(index)
        while True:
            try:
                r = todo.get_nowait()
            except queue.Empty:
                return
            t0 = time.monotonic()
            try:
                self._tune(r, gpu)
            except KernelFailed as e:
                r.status, r.detail = "failed", str(e)
            except Exception as e:  # a bug must not lose the other kernels' results
                r.status, r.detail = "failed", f"internal error: {type(e).__name__}: {e}"
            r.seconds = time.monotonic() - t0
            if self.db and r.status in ("tuned", "failed") and not self.o.compile_only:
                self._store(r)
            self._show(r)

    def _show(self, r: KernelResult) -> None:
        if self.display is not None:
            self.display.update(r)

    def _tune(self, r: KernelResult, gpu: _GpuSlot | None) -> None:
        o, task = self.o, r.task
        r.status = "tuning"
        self._show(r)
        space = Space(task.module, task.schedule, cost.features)
        r.space_size, r.decisions = space.size, len(space.decisions)
        text = print_module(task.module)
        reference = self.pool.submit(self._compile, text, {}, _reference_pipeline(task.schedule, space))
        baseline_point = space.point(space.baseline)
        baseline = self.pool.submit(self._compile, text, baseline_point, task.pipeline)
        root = space.root()
        tree = _Tree(space, r)
        seed = (o.seed * 0x9E3779B1 + int(task.key.hash[:8], 16)) % 2**32
        search = SPMCTS(tree, root, seed=seed)
        t_start = time.monotonic()
        search_s = max(o.seconds / 2, o.seconds - (o.confirm + 1) * CONFIRM["max_seconds_per_case"])  # room to confirm

        ref = reference.result()
        if "text" not in ref:
            raise KernelFailed(f"the reference schedule does not compile: {ref.get('error') or ref['refused']}")
        base = baseline.result()
        if "text" not in base:
            raise KernelFailed(f"the baseline does not compile: {base.get('error') or base['refused']}")
        base_ir = space.schedule_of(space.baseline)
        r.baseline = Candidate(baseline_point, "ok", program=base["text"])
        r.baseline.predicted_s = _predicted(cost.features(base_ir), base)
        r.candidates.append(r.baseline)
        if gpu is not None:
            gpu.prepare(task, ref["text"], tolerance(task.module))
            t_start = time.monotonic()  # the kernel's seconds: its reference run (and a new worker's start) are not
            self._measure_one(r, gpu, r.baseline, base["text"])
            if r.baseline.status != "ok":  # recorded: it cost a candidate like any other
                raise KernelFailed(f"the baseline failed ({r.baseline.status}: {r.baseline.detail})")
            # room for the confirmation: the best few and the baseline, each costing what the baseline's ranking
            # cost (loading, checking, timing) and the confirmation's further runs at about its time
            runs = CONFIRM["reps"] + CONFIRM["warmup"] - RANK["reps"] - RANK["warmup"]
            each = time.monotonic() - t_start + runs * (r.baseline.median_s + FLUSH_S)
            search_s = max(o.seconds / 2, o.seconds - (o.confirm + 1) * min(CONFIRM["max_seconds_per_case"], each))
        else:
            r.baseline.median_s = r.baseline.predicted_s
        self._show(r)
        # the heuristic's point is the incumbent (rollouts start as its neighbours) until a measured point beats
        # it; points the cost model puts many times past it are not measured
        search.start(space.baseline, r.baseline.median_s, digest(base_ir))
        if r.baseline.predicted_s is not None and math.isfinite(r.baseline.predicted_s):
            search.cutoff = o.prune_ratio * r.baseline.predicted_s

        seen = {digest(base_ir): r.baseline}  # final schedule -> its candidate
        pending: deque = deque()
        # compiles kept ahead of the GPU: enough to hide one (1-2 s) behind proposing and measuring those before
        # it, few enough that the first measurements, the search's feedback, come early (a proposal takes 0.3-1 s)
        in_flight = min(self.jobs, AHEAD) + 1
        best, since = r.baseline.median_s, 0
        exhausted = False
        while True:
            stop = (
                r.measured >= o.budget
                or time.monotonic() - t_start >= search_s
                or since >= o.patience
                or r.pruned > 20 * o.budget
            )
            while not stop and not exhausted and len(pending) < in_flight and time.monotonic() - t_start < search_s:
                leaf = search.propose()
                if leaf is None:
                    exhausted = True
                    break
                point = space.point(leaf.values)
                if leaf.state.digest in seen:
                    pending.append((leaf, point, None))
                else:
                    pending.append((leaf, point, self.pool.submit(self._compile, text, point, task.pipeline)))
            if not pending or stop:
                break
            leaf, point, future = pending.popleft()
            if future is None:  # the same schedule as a point already measured
                same = seen[leaf.state.digest]
                search.report(leaf, same.median_s if same.status == "ok" else None)
                continue
            compiled = future.result()
            if "error" in compiled:
                c = Candidate(point, "error", detail=compiled["error"])
                r.candidates.append(c)
                search.report(leaf, None)
                continue
            why = compiled.get("refused") or static_limit(compiled, o.spill_bytes)
            if why:
                r.pruned += 1
                search.report(leaf, None)
                self._show(r)
                continue
            c = Candidate(point, "ok", predicted_s=_predicted(leaf.state.features, compiled), program=compiled["text"])
            if gpu is not None:
                self._measure_one(r, gpu, c, compiled["text"])
            else:
                c.median_s = c.predicted_s
            r.candidates.append(c)
            seen[leaf.state.digest] = c
            if c.status == "ok":
                search.report(leaf, c.median_s)
                if c.median_s < best * 0.99:
                    best, since = c.median_s, 0
                else:
                    since += 1
            else:
                search.report(leaf, None)
                since += 1
            r.reliable = search.reliable
            r.unlikely = search.unlikely
            self._show(r)
        for _, _, future in pending:
            if future is not None:
                future.cancel()
        self._confirm(r, gpu, o.seconds - (time.monotonic() - t_start))
        if r.winner is not None and r.winner.point:
            r.winner.point = space.point(space.simplest(space.values_of(r.winner.point)))
        r.status = "tuned" if gpu is not None else "compiled"

    def _measure_one(self, r: KernelResult, gpu: _GpuSlot, c: Candidate, program: str) -> None:
        res = gpu.measure(r.task, {"c": program}, RANK, self.o.timeout)["c"]
        c.status, c.detail = res["status"], res.get("detail", "")
        c.median_s, c.reps = res.get("median_s"), res.get("reps", 0)

    def _confirm(self, r: KernelResult, gpu: _GpuSlot | None, left_s: float) -> None:
        """Measure the best few and the baseline together, longer, within the kernel's `left_s` seconds left (a
        short --time gets a short confirmation, not an overrun); the fastest is the winner."""
        ok = sorted((c for c in r.candidates if c.status == "ok" and c is not r.baseline), key=lambda c: c.median_s)
        top = [r.baseline, *ok[: self.o.confirm]]
        if gpu is None or len(top) == 1:
            r.winner = min(top, key=lambda c: c.median_s)
            return
        programs = {str(i): c.program for i, c in enumerate(top)}
        settings = dict(
            CONFIRM, max_seconds_per_case=min(CONFIRM["max_seconds_per_case"], max(left_s, CONFIRM_FLOOR_S))
        )
        res = gpu.measure(r.task, programs, settings, self.o.timeout * 4 + 10)
        confirmed = []
        for i, c in enumerate(top):
            m = res.get(str(i), {"status": "error", "detail": "not measured"})
            cc = Candidate(
                c.point, m["status"], m.get("median_s"), m.get("reps", 0), m.get("detail", ""), phase="confirm"
            )
            cc.predicted_s = c.predicted_s
            confirmed.append(cc)
        r.confirmed = confirmed
        good = [c for c in confirmed if c.status == "ok"]
        r.winner = min(good, key=lambda c: c.median_s) if good else r.baseline
        if confirmed[0].status == "ok":
            r.baseline = confirmed[0]
            if r.winner.median_s > (1 - WIN_MARGIN) * r.baseline.median_s:
                r.winner = r.baseline

    def _store(self, r: KernelResult) -> None:
        from irforge.bench.compile_cache import source_hash

        w = r.winner
        entry = Entry(
            r.task.key,
            r.task.name,
            w.point if w is not None and r.status == "tuned" else {},
            w.median_s if w is not None else None,
            r.baseline.median_s if r.baseline is not None else None,
            candidates=r.measured,
            failed=r.failed,
            pruned=r.pruned,
            seconds=r.seconds,
            gpu=self.gpu_name or None,
            source=source_hash()[:16],
        )
        if r.status == "failed":
            entry.winner, entry.best_s = {}, None
        with self._lock:
            self.db.record(entry, [c.record() for c in r.candidates + r.confirmed])


def _reference_pipeline(suffix: list[ScheduledPass], space: Space) -> str:
    """The lowering without the passes that make decisions: one thread per output point."""
    deciding = {d.pass_name for d in space.decisions}
    return schedule_text([sp for sp in suffix if sp.pass_.name not in deciding])


def kernel_tasks(
    programs: list[tuple[str, ModuleOp]], schedule: list[ScheduledPass], tuner: Tuner
) -> tuple[list[KernelTask], list[str]]:
    """The distinct kernels of loop-level programs that `schedule` lowers (by key, in order of first appearance),
    and a note for each kernel that cannot be tuned alone."""
    from irforge.diagnostics import IRForgeError

    from .space import isolate, kernels_of

    tasks: dict[Key, KernelTask] = {}
    notes = []
    for program, module in programs:
        for k in kernels_of(module):
            name = f"{program}/{k.attributes['sym_name']}"
            try:
                iso = isolate(k)
            except IRForgeError as e:
                notes.append(f"{name}: {e.message}")
                continue
            key = tuner.key(iso, schedule)
            if key in tasks:
                tasks[key].uses.append(name)
            else:
                tasks[key] = KernelTask(name, iso, schedule, key, [name])
    return list(tasks.values()), notes
