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

from irforge.bench.case import FULL_TOLERANCE, HALF_TOLERANCE
from irforge.builtin import ModuleOp
from irforge.pass_manager import ScheduledPass
from irforge.pipeline import schedule_text
from irforge.printer import print_module
from irforge.target import target

from . import cost
from .db import Entry, Key, TuneDB
from .mcts import SPMCTS
from .space import Space, digest, kernel_key, space_version
from .worker import RemoteError, Worker, WorkerFailed

RANK = {"reps": 20, "min_reps": 5, "warmup": 3, "max_seconds_per_case": 0.25}
CONFIRM = {"reps": 100, "min_reps": 10, "warmup": 10, "max_seconds_per_case": 2.0}
CONFIRM_FLOOR_S = 0.1  # the least a confirmation's timed runs get when the kernel's seconds are spent
# A point replaces the heuristic's only when the confirmation times it this much faster: the whole-seed84 run on an
# H100 (bench/results/tune-h100-2026-11-27b) kept winners 0-2% faster there that the suite then timed 4-7% slower
# (silu_mul's kernels, within the runs' own spread).
WIN_MARGIN = 0.03
FAILED = ("wrong", "error", "fault", "timeout", "crash")
AHEAD = 4  # candidates compiling while the GPU measures
FLUSH_S = 50e-6  # the L2 flush before each timed run


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


def _seconds(features) -> float | None:
    return cost.seconds(features) if features is not None else None


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


class _Tree:
    """The space as the search sees it: children with the cost model's predictions, counts kept."""

    def __init__(self, space: Space, result: KernelResult):
        self.space, self.r = space, result
        self.depth = len(space.decisions)

    def is_leaf(self, state) -> bool:
        return self.space.is_leaf(state)

    def expand(self, state):
        ex = self.space.expand(state)
        self.r.refused += len(ex.refused)
        self.r.merged += len(ex.merged)
        aliases: dict = {}
        for v, kept in ex.merged:
            aliases.setdefault(kept, []).append(v)
        return [(v, c, _seconds(c.features), aliases.get(v, ())) for v, c in ex.children]

    def values(self, state) -> tuple:
        return self.space.decisions[len(state.values)].values

    def step(self, state, value):
        return self.space.step(state, value)

    def values_of(self, state) -> tuple:
        return state.values

    def key(self, leaf) -> str:
        return self.space.finish(leaf).digest

    def predict(self, leaf) -> float | None:
        return _seconds(leaf.features)


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
