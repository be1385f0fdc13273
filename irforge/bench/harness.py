"""The measurement method: systems timed interleaved in one process, on one device, each result checked first.

Per case: the inputs and weights are made from the case's seed; eager runs once (the reference); every other system
is built, called once and compared with eager (relative error by norm under the case's tolerance): a wrong result
or an error is recorded and that system is not timed. Each system left is warmed up and one call is timed, which
plans its number of runs: `reps` (100 by default) where the case's time budget allows, fewer (down to `min_reps`)
for a system whose calls are slow, the budget shared between the systems. The runs are interleaved (one call of
each system per round, so drift hits all alike), each bracketed by CUDA events with the L2 cache flushed before
it; the median is kept with the 10th and 90th percentiles and the number of runs. The ceilings (device-to-device
copy bandwidth, f32 matmul rate without TF32, bf16 and f16 matmul rates) are measured in the same process.

A `Timer` does the timing; `CudaTimer` is the real one, and tests drive the same loop with a fake clock.
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from irforge.diagnostics import IRForgeError

from . import COMPILE_MODE
from .case import DTYPE_NAMES, Case


# ---- systems ---------------------------------------------------------------------------------------------------
@dataclass
class System:
    """A way to run a case: `build(case, program)` returns a callable on the case's inputs (`program` is the
    case's module on the device, with its weights), or raises (an error row)."""

    name: str
    build: Callable[[Case, torch.nn.Module], Callable]


def eager() -> System:
    return System("eager", lambda case, program: program)


def torch_compile(mode: str = COMPILE_MODE) -> System:
    def build(case, program):
        torch._dynamo.reset()  # every case compiles afresh: no recompilation limit, no stale guards
        return torch.compile(program, mode=mode, dynamic=False)

    return System("torch.compile", build)


def executor_fn(exe) -> Callable:
    """An irforge `Executor` as a system's callable: its outputs as eager returns them (a tensor, or a tuple)."""

    def run(*inputs):
        outs = exe(*inputs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    return run


# ---- timing ----------------------------------------------------------------------------------------------------
class Timer:
    """Times calls in interleaved rounds. Subclasses say how one call is timed (`_record`) and when the times
    are known (`_collect`)."""

    overhead_ms = 0.0  # device time each timed call adds (the flush), counted when planning runs

    def once(self, name: str, fn) -> float:
        """Milliseconds of one call."""
        return self.measure({name: fn}, {name: 1})[name][0]

    def measure(self, fns: dict[str, Callable], reps: dict[str, int]) -> dict[str, list[float]]:
        """`reps[name]` timed calls of each function, interleaved: round r calls every function that still
        needs a run, in order."""
        for r in range(max(reps.values(), default=0)):
            for name, fn in fns.items():
                if r < reps[name]:
                    self._record(name, fn)
        return self._collect()

    def _record(self, name: str, fn) -> None:
        raise NotImplementedError

    def _collect(self) -> dict[str, list[float]]:
        raise NotImplementedError


class CudaTimer(Timer):
    """CUDA events around each call, the L2 cache flushed before it: a buffer twice its size is written, then another
    as large is read, so the cache holds clean lines only. Written alone, the flush left L2 full of dirty lines
    whose write-back the timed call paid: about 10 us of DRAM traffic a call on an H100, eager's 131 MB GEMV 61.5
    -> 52.2 us (bench/results/flush_clean-h100-2026-11-27).

    With `host_ahead` (the default) the GPU also spins for a while after the flush, so the host has queued the
    whole call before its start event runs: the events then bracket GPU time only, and a system's Python launch
    overhead does not show as idle GPU time inside its measurement."""

    SLEEP_CYCLES = 200_000  # ~100 us at Hopper clocks: more than any system's host overhead per call

    def __init__(self, host_ahead: bool = True):
        l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size or (64 << 20)
        self.flush_buffer = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda")
        self.clean_buffer = torch.zeros(2 * l2 // 4, dtype=torch.float32, device="cuda")
        self._sink = torch.empty((), dtype=torch.float32, device="cuda")
        self.host_ahead = host_ahead and hasattr(torch.cuda, "_sleep")
        self._events: dict[str, list] = {}
        self.overhead_ms = 0.0
        self.overhead_ms = self.once("flush", lambda: None)

    def _flush(self) -> None:
        self.flush_buffer.zero_()
        torch.sum(self.clean_buffer, dim=0, out=self._sink)  # evicts the written lines: the write-back happens here
        if self.host_ahead:
            torch.cuda._sleep(self.SLEEP_CYCLES)

    def _record(self, name, fn) -> None:
        self._flush()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        self._events.setdefault(name, []).append((start, end))

    def _collect(self):
        torch.cuda.synchronize()
        out = {n: [s.elapsed_time(e) for s, e in evs] for n, evs in self._events.items()}
        self._events = {}
        return out

    def description(self) -> str:
        return "CUDA events, L2 flushed before each run" + (
            ", the GPU kept busy before each so host overhead is not timed"
            if self.host_ahead
            else ", host overhead included"
        )


def plan_reps(cost_ms: dict[str, float], reps: int, budget_s: float, min_reps: int) -> dict[str, int]:
    """Runs per system: `reps` each if the budget allows, else the budget shared out cheapest first (each system
    gets an equal share of what is left; what a cheap one does not use goes to the rest), never under `min_reps`."""
    out = {}
    left = budget_s * 1e3
    order = sorted(cost_ms, key=lambda n: cost_ms[n])
    for i, name in enumerate(order):
        share = left / (len(order) - i)
        n = max(min_reps, min(reps, int(share // max(cost_ms[name], 1e-6))))
        out[name] = n
        left -= n * cost_ms[name]
    return {n: out[n] for n in cost_ms}


# ---- results ---------------------------------------------------------------------------------------------------
def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def compare(out, ref, tolerance: float) -> tuple[bool, float, str]:
    """(ok, worst relative error by norm, reason) of a system's outputs against eager's."""
    outs, refs = _as_tuple(out), _as_tuple(ref)
    if len(outs) != len(refs):
        return False, math.inf, f"{len(outs)} outputs, eager has {len(refs)}"
    worst = 0.0
    for o, r in zip(outs, refs):
        if tuple(o.shape) != tuple(r.shape):
            return False, math.inf, f"shape {tuple(o.shape)}, eager {tuple(r.shape)}"
        o64, r64 = o.detach().double(), r.detach().double()
        if torch.isnan(o64).any() and not torch.isnan(r64).any():
            return False, math.inf, "NaN in output"
        err = float((o64 - r64).norm() / r64.norm().clamp_min(1e-30))
        worst = max(worst, err)
        if not err < tolerance:
            return False, worst, f"relative error {err:.2e} over {tolerance:.0e}"
    return True, worst, ""


class CaseError(Exception):
    """A failure already said in one line (one recorded when the case was compiled, maybe on another machine)."""


def first_line(e: BaseException) -> str:
    if isinstance(e, CaseError):
        return str(e)
    text = e.render() if isinstance(e, IRForgeError) else f"{type(e).__name__}: {e}"
    line = (text.strip().splitlines() or [type(e).__name__])[0]
    for prefix in _path_prefixes():  # file names relative to the checkout or site-packages: results travel
        line = line.replace(prefix, "")
    return line


def _path_prefixes() -> list[str]:
    import os
    import sysconfig

    import irforge

    root = os.path.dirname(os.path.dirname(os.path.abspath(irforge.__file__)))
    return [os.path.join(sysconfig.get_paths()["purelib"], ""), os.path.join(root, "")]


class ContextLost(Exception):
    """The device failed in a way that poisons every later call (an illegal address, a launch failure)."""


def device_alive(device) -> bool:
    if torch.device(device).type != "cuda":
        return True
    try:
        torch.ones(1, device=device).add_(1)
        torch.cuda.synchronize()
        return True
    except Exception:
        return False


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


# ---- a run -----------------------------------------------------------------------------------------------------
@dataclass
class Settings:
    reps: int = 100
    min_reps: int = 3
    warmup: int = 10
    max_seconds_per_case: float = 3.0
    device: str = "cuda"


def run_case(case: Case, systems: list[System], timer: Timer, s: Settings, log=lambda msg: None) -> dict:
    """One row: every system's status, and the times of those that ran correctly."""
    row = case_row(case)
    entries = row["systems"]
    why = case.missing()
    if why:
        for sys_ in systems:
            entries[sys_.name] = {"status": "skipped", "detail": why}
        return row
    try:
        program = case.program(s.device)
        inputs = case.make_inputs(s.device)
        ref = program(*inputs)
        _sync(s.device)
    except Exception as e:
        if not device_alive(s.device):
            raise ContextLost(f"{case.id}: {first_line(e)}") from e
        for sys_ in systems:
            entries[sys_.name] = {"status": "error", "detail": f"eager reference failed: {first_line(e)}"}
        return row
    fns = {}
    for sys_ in systems:
        entry = entries[sys_.name] = {}
        t0 = time.perf_counter()
        try:
            fn = sys_.build(case, program)
            out = fn(*inputs)  # compiles and loads what the system needs
            _sync(s.device)
        except Exception as e:
            entry.update(status="error", detail=first_line(e))
            # a diagnostic (a refused option, an unsupported op) says all in its line; a crash's trace goes along
            trace = "" if isinstance(e, (CaseError, IRForgeError)) else "\n" + traceback.format_exc(limit=-3)
            log(f"{case.id}: {sys_.name} failed: {first_line(e)}{trace}")
            if not device_alive(s.device):
                raise ContextLost(f"{case.id}: {sys_.name}: {first_line(e)}") from e
            continue
        entry["build_s"] = time.perf_counter() - t0
        if sys_.name != "eager":  # eager is the reference
            ok, err, why = compare(out, ref, case.tol)
            entry["rel_error"] = err
            if not ok:
                entry.update(status="wrong", detail=why)
                continue
        entry["status"] = "ok"
        fns[sys_.name] = lambda fn=fn: fn(*inputs)
    del ref
    try:
        times = time_calls(fns, timer, s)
    except Exception as e:
        if not device_alive(s.device):
            raise ContextLost(f"{case.id}: timing: {first_line(e)}") from e
        for name in fns:
            entries[name].update(status="error", detail=f"timing failed: {first_line(e)}")
        return row
    for name, ts in times.items():
        entries[name].update(
            median_ms=float(np.median(ts)),
            p10_ms=float(np.percentile(ts, 10)),
            p90_ms=float(np.percentile(ts, 90)),
            reps=len(ts),
        )
    return row


def time_calls(fns: dict, timer: Timer, s: Settings) -> dict[str, list[float]]:
    """Warm up (at most `warmup` calls or a tenth of the budget per system), time one call of each to plan the
    runs, then the interleaved runs."""
    cost = {}
    for name, fn in fns.items():
        t0 = time.perf_counter()
        for _ in range(s.warmup):
            fn()
            if time.perf_counter() - t0 > s.max_seconds_per_case / 10 / len(fns):
                break
        cost[name] = timer.once(name, fn) + timer.overhead_ms
    reps = plan_reps(cost, s.reps, s.max_seconds_per_case, s.min_reps)
    return timer.measure(fns, reps)


def case_row(case: Case) -> dict:
    try:
        nbytes = case.bytes
    except Exception:  # the case itself fails (its row says how): its bytes are unknown
        nbytes = None
    return {
        "id": case.id,
        "family": case.family,
        "model": case.model,
        "shapes": case.shapes(),
        "dtype": DTYPE_NAMES[case.dtype],
        "note": case.note,
        "bytes": nbytes,
        "flops": case.flops,
        "tolerance": case.tol,
        "systems": {},
    }


def status_row(case: Case, systems: list[System], status: str, why: str) -> dict:
    """A row where every system has the same status (an error, "not run")."""
    row = case_row(case)
    row["systems"] = {s.name: {"status": status, "detail": why} for s in systems}
    return row


# ---- ceilings --------------------------------------------------------------------------------------------------
def measure_ceilings(timer: Timer, device="cuda") -> dict[str, float]:
    """Copy bandwidth (bytes read + written per second, a 1 GiB device-to-device copy) and the f32 (no TF32),
    bf16 and f16 rates of a large matmul (random data: zeros run faster than real data)."""
    return {
        "copy_bytes_per_s": _copy_rate(timer, device, 1 << 30),
        "f32_matmul_flop_per_s": _matmul_rate(timer, device, torch.float32, 8192),
        "bf16_matmul_flop_per_s": _matmul_rate(timer, device, torch.bfloat16, 8192),
        "f16_matmul_flop_per_s": _matmul_rate(timer, device, torch.float16, 8192),
    }


def _copy_rate(timer: Timer, device, nbytes: int) -> float:
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).normal_()
    dst = torch.empty_like(src)
    return 2 * nbytes / (_median_of(timer, lambda: dst.copy_(src), 30) / 1e3)


def _matmul_rate(timer: Timer, device, dtype, n: int) -> float:
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    return 2 * n**3 / (_median_of(timer, lambda: torch.matmul(a, b), 20) / 1e3)


def _median_of(timer: Timer, fn, reps: int) -> float:
    for _ in range(3):
        fn()
    return float(np.median(timer.measure({"ceiling": fn}, {"ceiling": reps})["ceiling"]))


def run_suite(cases: list[Case], systems: list[System], timer: Timer, s: Settings, progress=None, log=print) -> list:
    """Every case's row, in order. A device failure that poisons the process ends the run: that case is an
    error row, and the rest are rows marked "not run" (run them in a fresh process: `--resume`)."""
    rows: list = []
    with torch.no_grad():
        for i, case in enumerate(cases):
            if progress:
                progress.start(i, case)
            try:
                row = run_case(case, systems, timer, s, log)
            except ContextLost as e:
                row = status_row(case, systems, "error", f"device failed: {e}")
                why = f"the device failed at {case.id} and cannot run more in this process"
                rows += [row, *(status_row(c, systems, "not run", why) for c in cases[i + 1 :])]
                if progress:
                    progress.done(row, rows)
                break
            except Exception as e:  # a bug in a case or a system: that row says so, the run goes on
                log(f"{case.id}: {traceback.format_exc()}")
                row = status_row(case, systems, "error", first_line(e))
            finally:
                if torch.device(s.device).type == "cuda" and device_alive(s.device):
                    torch.cuda.empty_cache()
            rows.append(row)
            if progress:
                progress.done(row, rows)
    return rows


# ---- environment -----------------------------------------------------------------------------------------------
def environment() -> dict:
    """What a result depends on: the device and its driver, the software stack, the irforge revision."""
    import datetime
    import importlib.metadata
    import platform

    from .compile_cache import source_hash

    env = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "none",
        "torch": torch.__version__,
        "cuda (torch)": torch.version.cuda,
        "python": platform.python_version(),
        "irforge revision": git_revision(),
        "irforge source hash": source_hash()[:16],
    }
    for pkg in ("transformers", "triton", "cuda-bindings", "nvidia-cuda-nvrtc"):
        try:
            env[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            env[pkg] = "not installed"
    try:
        from irforge.runtime import driver, nvrtc

        env["driver"] = driver.driver_version() if driver.has_gpu() else "none"
        env["nvrtc"] = ".".join(map(str, nvrtc.nvrtc_version()))
    except Exception as e:  # the report says what is missing rather than failing
        env["driver"] = f"unavailable: {first_line(e)}"
    return env


def git_revision() -> str:
    """HEAD of the checkout irforge runs from (and whether its tree differs from HEAD); IRFORGE_GIT_REV wins, for
    a copy of a checkout without its .git."""
    import os
    import subprocess
    from pathlib import Path

    if os.environ.get("IRFORGE_GIT_REV"):
        return os.environ["IRFORGE_GIT_REV"]
    root = Path(__file__).resolve().parents[2]
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=root, capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True
        )
    except OSError:
        return "unknown"
    if rev.returncode != 0:
        return "unknown"
    return rev.stdout.strip() + (" (modified)" if dirty.stdout.strip() else "")
