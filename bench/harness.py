"""The benchmark harness of docs/BENCHMARKS.md: systems timed interleaved in one process, on the same GPU.

    from bench.harness import Case, System, run_suite, eager, torch_compile
    cases = [Case("S1", lambda: (torch.randn(16384, 512, device="cuda"),), lambda x: torch.softmax(x, -1),
                  bytes=2 * 16384 * 512 * 4)]
    report = run_suite(cases, [eager(), torch_compile(), System("irforge", build=my_builder)])

A `System` turns a case into a callable (or None where it does not apply); eager is the reference every other
system is checked against before it is timed. Method, per case: each system's result is compared with eager's
(a wrong result is reported, never timed); each system is warmed up; then `reps` rounds, each timing every system
once (interleaved, so drift hits all alike), with CUDA events around the call and the L2 cache flushed before
it (a buffer twice the L2 size is written); the median is reported. The ceilings are measured in the same process:
a large device-to-device copy (bytes read + written) and a large bf16 matmul. A run writes JSON (environment and
every row), a markdown table and a PNG chart.

    python bench/harness.py --self-check        # torch only: ceilings and eager vs torch.compile on two cases
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class Case:
    """One benchmark row: inputs (made once), the eager reference, and what the row moves and computes."""

    id: str
    make_inputs: Callable[[], tuple]  # -> CUDA tensors
    eager: Callable  # inputs -> output (tensor or tuple of tensors)
    bytes: int  # effective bytes: each input read once, each output written once
    flops: int = 0
    note: str = ""
    tolerance: float | None = None  # ||out - eager|| / ||eager||; default by dtype (f32 1e-4, halves 2e-2)


@dataclass
class System:
    name: str
    build: Callable[[Case], Callable | None]  # a callable taking the case's inputs, or None if it does not apply


def eager() -> System:
    return System("eager", lambda case: case.eager)


def torch_compile(mode: str = "max-autotune-no-cudagraphs") -> System:
    import torch

    return System("torch.compile", lambda case: torch.compile(case.eager, mode=mode, dynamic=False))


# ---- measurement -----------------------------------------------------------------------------------------------
class Timer:
    """CUDA-event timing with an L2 flush before every timed call.

    With `host_ahead` (the default) the GPU also spins for a while (`torch.cuda._sleep`) after the flush, so the
    host has queued the whole call before its start event runs: the events then bracket GPU time only, and a
    system's Python launch overhead does not show as idle GPU time inside its measurement."""

    SLEEP_CYCLES = 200_000  # ~100 us at Hopper clocks: more than any system's host overhead per call

    def __init__(self, host_ahead: bool = True):
        import torch

        self.torch = torch
        l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size or (64 << 20)
        self.flush_buffer = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda")
        self.host_ahead = host_ahead and hasattr(torch.cuda, "_sleep")

    def flush(self) -> None:
        self.flush_buffer.zero_()
        if self.host_ahead:
            self.torch.cuda._sleep(self.SLEEP_CYCLES)

    def time_interleaved(self, fns: dict[str, Callable], reps: int, warmup: int) -> dict[str, list[float]]:
        torch = self.torch
        for fn in fns.values():
            for _ in range(warmup):
                fn()
        torch.cuda.synchronize()
        events = {
            n: [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
            for n in fns
        }
        for r in range(reps):
            for name, fn in fns.items():
                self.flush()
                start, end = events[name][r]
                start.record()
                fn()
                end.record()
        torch.cuda.synchronize()
        return {n: [s.elapsed_time(e) for s, e in evs] for n, evs in events.items()}


def measure_copy_bandwidth(timer: Timer, nbytes: int = 1 << 30, reps: int = 50) -> float:
    """Bytes/s of a device-to-device copy, counting bytes read plus bytes written."""
    torch = timer.torch
    src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    times = timer.time_interleaved({"copy": lambda: dst.copy_(src)}, reps, warmup=5)["copy"]
    return 2 * nbytes / (float(np.median(times)) / 1e3)


def measure_bf16_matmul_rate(timer: Timer, n: int = 8192, reps: int = 30) -> float:
    """FLOP/s of a large bf16 matmul (random data: zeros run faster than real data)."""
    torch = timer.torch
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    times = timer.time_interleaved({"mm": lambda: torch.matmul(a, b)}, reps, warmup=5)["mm"]
    return 2 * n**3 / (float(np.median(times)) / 1e3)


def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def compare(out, ref, tolerance: float | None) -> tuple[bool, float, str]:
    """(ok, worst relative error, reason) of a system's outputs against eager's."""
    import torch

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
        tol = tolerance if tolerance is not None else (1e-4 if r.dtype in (torch.float32, torch.float64) else 2e-2)
        if not err < tol:
            return False, worst, f"relative error {err:.2e} over {tol:.0e}"
    return True, worst, ""


# ---- a run -----------------------------------------------------------------------------------------------------
@dataclass
class Report:
    env: dict
    ceilings: dict
    rows: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {"environment": self.env, "ceilings": self.ceilings, "rows": self.rows}


def environment() -> dict:
    import torch

    env = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda (torch)": torch.version.cuda,
        "python": platform.python_version(),
        "host": platform.node(),
        "irforge git revision": _git_revision(),
    }
    try:
        from irforge.runtime import driver, nvrtc

        env["driver (CUDA version it supports)"] = driver.driver_version()
        env["nvrtc"] = ".".join(map(str, nvrtc.nvrtc_version()))
        import cuda.bindings

        env["cuda-bindings"] = cuda.bindings.__version__
    except Exception as e:  # the harness must run with torch alone (self-check mode)
        env["irforge runtime"] = f"unavailable: {e}"
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        if smi.returncode == 0:
            env["nvidia-smi (driver, max SM clock, memory)"] = smi.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return env


def _git_revision() -> str:
    """HEAD (and whether the tree differs from it); IRFORGE_GIT_REV wins, for copies of a checkout whose .git is
    not the one measured."""
    if os.environ.get("IRFORGE_GIT_REV"):
        return os.environ["IRFORGE_GIT_REV"]
    try:
        root = Path(__file__).resolve().parent.parent
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, timeout=10)
        if rev.returncode == 0:
            return rev.stdout.strip() + (" (modified)" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def run_suite(
    cases: list[Case], systems: list[System], *, reps: int = 100, warmup: int = 10, host_ahead: bool = True, log=print
) -> Report:
    import torch

    if reps < 100:
        log(f"note: {reps} runs per median; the method asks for at least 100 (results are marked)")
    timer = Timer(host_ahead)
    copy_bw = measure_copy_bandwidth(timer)
    mm_rate = measure_bf16_matmul_rate(timer)
    env = environment()
    env["timing"] = (
        f"CUDA events, median of {reps} interleaved runs{' (under the 100 the method asks)' if reps < 100 else ''}"
        f" after {warmup} warm-up runs, L2 flushed before each"
        + (
            ", GPU kept busy before each so host overhead is not timed"
            if timer.host_ahead
            else ", host overhead included"
        )
    )
    report = Report(env, {"copy_bytes_per_s": copy_bw, "bf16_matmul_flop_per_s": mm_rate})
    log(f"copy bandwidth {copy_bw / 1e12:.3f} TB/s (read + write), bf16 matmul {mm_rate / 1e12:.1f} TFLOP/s")
    for case in cases:
        torch.manual_seed(0)
        inputs = case.make_inputs()
        ref = case.eager(*inputs)
        floor_s = max(case.bytes / copy_bw, case.flops / mm_rate if case.flops else 0.0)
        row = {
            "id": case.id,
            "note": case.note,
            "bytes": case.bytes,
            "flops": case.flops,
            "floor_us": floor_s * 1e6,
            "systems": {},
        }
        fns = {}
        for sys_ in systems:
            entry = row["systems"].setdefault(sys_.name, {})
            try:
                fn = sys_.build(case)
                if fn is None:
                    entry["status"] = "n/a"
                    continue
                out = fn(*inputs)  # also compiles and warms up what needs it
                torch.cuda.synchronize()
                ok, err, why = compare(out, ref, case.tolerance)
                entry["rel_error"] = err
                if not ok:
                    entry["status"] = f"WRONG: {why}"
                    log(f"{case.id}: {sys_.name} is wrong ({why}); not timed")
                    continue
                entry["status"] = "ok"
                fns[sys_.name] = lambda fn=fn: fn(*inputs)
            except Exception as e:
                entry["status"] = f"FAILED: {type(e).__name__}: {e}"
                log(f"{case.id}: {sys_.name} failed: {e}\n{traceback.format_exc(limit=3)}")
        times = timer.time_interleaved(fns, reps, warmup) if fns else {}
        for name, ts in times.items():
            ms = float(np.median(ts))
            e = row["systems"][name]
            e["median_ms"] = ms
            e["spread_ms"] = [float(np.percentile(ts, 10)), float(np.percentile(ts, 90))]
            e["bytes_per_s"] = case.bytes / (ms / 1e3)
            e["pct_copy_bw"] = 100 * e["bytes_per_s"] / copy_bw
            if case.flops:
                e["pct_matmul_rate"] = 100 * case.flops / (ms / 1e3) / mm_rate
        for e in row["systems"].values():
            for base in ("eager", "torch.compile"):
                b = row["systems"].get(base, {}).get("median_ms")
                if "median_ms" in e and b:
                    e[f"speedup_vs_{base}"] = b / e["median_ms"]
        report.rows.append(row)
        log(_row_line(row))
    return report


def _row_line(row) -> str:
    parts = [f"{row['id']:<24}"]
    for name, e in row["systems"].items():
        if "median_ms" in e:
            parts.append(f"{name} {e['median_ms'] * 1e3:9.1f} us ({e['pct_copy_bw']:5.1f}% bw)")
        else:
            parts.append(f"{name} {e.get('status', '?')}")
    return " | ".join(parts)


def markdown(report: Report) -> str:
    systems = list(dict.fromkeys(n for r in report.rows for n in r["systems"]))
    vs = [(s, base) for base in ("eager", "torch.compile") for s in systems if s not in ("eager", base)]
    c = report.ceilings
    head = ["case", "MB", "floor us"] + [f"{s} us (% bw)" for s in systems] + [f"{s} / {b}" for s, b in vs]
    out = [
        f"GPU: {report.env.get('gpu')}; torch {report.env.get('torch')}; {report.env.get('date')}; "
        f"irforge {report.env.get('irforge git revision')}",
        "",
        f"Measured ceilings: copy {c['copy_bytes_per_s'] / 1e12:.3f} TB/s (read + write), "
        f"bf16 matmul {c['bf16_matmul_flop_per_s'] / 1e12:.1f} TFLOP/s. Ratios are speedups (time of the second "
        "system over time of the first).",
        "",
        "| " + " | ".join(head) + " |",
        "|---|" + "---:|" * (len(head) - 1),
    ]
    for r in report.rows:
        cells = [r["id"], f"{r['bytes'] / 1e6:.1f}", f"{r['floor_us']:.1f}"]
        for s in systems:
            e = r["systems"].get(s, {})
            ok = "median_ms" in e
            cells.append(f"{e['median_ms'] * 1e3:.1f} ({e['pct_copy_bw']:.0f}%)" if ok else e.get("status", "-"))
        for s, b in vs:
            e = r["systems"].get(s, {})
            cells.append(f"{e[f'speedup_vs_{b}']:.2f}x" if f"speedup_vs_{b}" in e else "-")
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    for s, b in vs:
        rs = [r["systems"][s][f"speedup_vs_{b}"] for r in report.rows if f"speedup_vs_{b}" in r["systems"].get(s, {})]
        if rs:
            g = math.exp(sum(math.log(x) for x in rs) / len(rs))
            worst = min(range(len(rs)), key=lambda i: rs[i])
            worst_id = [r["id"] for r in report.rows if f"speedup_vs_{b}" in r["systems"].get(s, {})][worst]
            out.append(
                f"{s} vs {b}: geomean {g:.2f}x over {len(rs)} cases, {sum(x >= 1 for x in rs)} at >= 1x, "
                f"worst {rs[worst]:.2f}x ({worst_id})"
            )
    return "\n".join(out) + "\n"


def write_report(report: Report, out_dir: str | Path, name: str = "bench") -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.json", out / f"{name}.md", out / f"{name}.png"]
    paths[0].write_text(json.dumps(report.to_json(), indent=2))
    paths[1].write_text(markdown(report))
    bar_chart(report.rows, paths[2])
    return paths


# ---- the PNG chart: matplotlib when installed, else a small built-in rasteriser (the GPU machine may lack it) ----
_COLORS = [(90, 90, 90), (230, 140, 30), (40, 110, 200), (60, 160, 80), (180, 60, 160)]


def bar_chart(rows: list, path: Path) -> None:
    """Horizontal bars: each case's achieved % of the measured copy bandwidth, one bar per system."""
    systems = list(dict.fromkeys(n for r in rows for n in r["systems"]))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _raster_chart(rows, systems, path)
        return
    fig, ax = plt.subplots(figsize=(10, 0.5 + 0.35 * len(rows) * len(systems)))
    h = 0.8 / max(len(systems), 1)
    for k, s in enumerate(systems):
        ys = [i + k * h for i in range(len(rows))]
        vals = [r["systems"].get(s, {}).get("pct_copy_bw", 0.0) for r in rows]
        ax.barh(ys, vals, height=h, label=s, color=[c / 255 for c in _COLORS[k % len(_COLORS)]])
    ax.set_yticks([i + 0.4 - h / 2 for i in range(len(rows))], [r["id"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("% of measured copy bandwidth")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# 5 x 7 glyphs, one int per row (bit 4 = leftmost pixel); lowercase letters print as capitals.
_FONT = {
    "0": [14, 17, 19, 21, 25, 17, 14],
    "1": [4, 12, 4, 4, 4, 4, 14],
    "2": [14, 17, 1, 2, 4, 8, 31],
    "3": [30, 1, 1, 14, 1, 1, 30],
    "4": [2, 6, 10, 18, 31, 2, 2],
    "5": [31, 16, 30, 1, 1, 17, 14],
    "6": [6, 8, 16, 30, 17, 17, 14],
    "7": [31, 1, 2, 4, 8, 8, 8],
    "8": [14, 17, 17, 14, 17, 17, 14],
    "9": [14, 17, 17, 15, 1, 2, 12],
    "A": [14, 17, 17, 31, 17, 17, 17],
    "B": [30, 17, 17, 30, 17, 17, 30],
    "C": [14, 17, 16, 16, 16, 17, 14],
    "D": [30, 17, 17, 17, 17, 17, 30],
    "E": [31, 16, 16, 30, 16, 16, 31],
    "F": [31, 16, 16, 30, 16, 16, 16],
    "G": [14, 17, 16, 23, 17, 17, 15],
    "H": [17, 17, 17, 31, 17, 17, 17],
    "I": [14, 4, 4, 4, 4, 4, 14],
    "J": [7, 2, 2, 2, 2, 18, 12],
    "K": [17, 18, 20, 24, 20, 18, 17],
    "L": [16, 16, 16, 16, 16, 16, 31],
    "M": [17, 27, 21, 21, 17, 17, 17],
    "N": [17, 17, 25, 21, 19, 17, 17],
    "O": [14, 17, 17, 17, 17, 17, 14],
    "P": [30, 17, 17, 30, 16, 16, 16],
    "Q": [14, 17, 17, 17, 21, 18, 13],
    "R": [30, 17, 17, 30, 20, 18, 17],
    "S": [15, 16, 16, 14, 1, 1, 30],
    "T": [31, 4, 4, 4, 4, 4, 4],
    "U": [17, 17, 17, 17, 17, 17, 14],
    "V": [17, 17, 17, 17, 17, 10, 4],
    "W": [17, 17, 17, 21, 21, 21, 10],
    "X": [17, 17, 10, 4, 10, 17, 17],
    "Y": [17, 17, 10, 4, 4, 4, 4],
    "Z": [31, 1, 2, 4, 8, 16, 31],
    ".": [0, 0, 0, 0, 0, 12, 12],
    "%": [24, 25, 2, 4, 8, 19, 3],
    "-": [0, 0, 0, 31, 0, 0, 0],
    "_": [0, 0, 0, 0, 0, 0, 31],
    "(": [2, 4, 8, 8, 8, 4, 2],
    ")": [8, 4, 2, 2, 2, 4, 8],
    "[": [14, 8, 8, 8, 8, 8, 14],
    "]": [14, 2, 2, 2, 2, 2, 14],
    ",": [0, 0, 0, 0, 12, 4, 8],
    ":": [0, 12, 12, 0, 12, 12, 0],
    "/": [1, 1, 2, 4, 8, 16, 16],
    "+": [0, 4, 4, 31, 4, 4, 0],
    "=": [0, 0, 31, 0, 31, 0, 0],
    " ": [0] * 7,
}


def _text(img, x: int, y: int, s: str, color=(0, 0, 0)) -> None:
    for ch in s.upper():
        for r, bits in enumerate(_FONT.get(ch, _FONT[" "])):
            for c in range(5):
                if bits >> (4 - c) & 1:
                    img[y + r, x + c] = color
        x += 6


def _raster_chart(rows: list, systems: list, path: Path) -> None:
    import struct
    import zlib

    bar_h, label_w, plot_w, pad = 9, 6 * 28, 520, 10
    n = len(rows) * (len(systems) * bar_h + 6)
    height, width = n + 2 * pad + 12 * len(systems) + 20, label_w + plot_w + 80
    img = np.full((height, width, 3), 255, dtype=np.uint8)
    scale = plot_w / 100.0  # 100% of the copy bandwidth
    y = pad
    for r in rows:
        _text(img, pad, y, r["id"][:27])
        for k, s in enumerate(systems):
            pct = r["systems"].get(s, {}).get("pct_copy_bw")
            if pct is not None:
                w = int(min(pct, 120) * scale)
                img[y : y + bar_h - 2, label_w : label_w + w] = _COLORS[k % len(_COLORS)]
                _text(img, label_w + w + 3, y, f"{pct:.0f}%")
            y += bar_h
        y += 6
    img[pad:y, label_w + int(100 * scale)] = (200, 0, 0)  # the copy-bandwidth line
    y += 6
    for k, s in enumerate(systems):
        img[y : y + 7, pad : pad + 10] = _COLORS[k % len(_COLORS)]
        _text(img, pad + 14, y, s)
        y += 12
    _text(img, pad, y + 2, "BARS: % OF MEASURED COPY BANDWIDTH (RED LINE = 100%)")
    raw = b"".join(b"\0" + img[i].tobytes() for i in range(height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    path.write_bytes(png)


# ---- self-check: torch only ------------------------------------------------------------------------------------
def self_check_cases() -> list[Case]:
    import torch

    return [
        Case(
            "softmax f32 [16384,512]",
            lambda: (torch.randn(16384, 512, device="cuda"),),
            lambda x: torch.softmax(x, -1),
            bytes=2 * 16384 * 512 * 4,
        ),
        Case(
            "add bf16 [2048,2048]",
            lambda: (torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16),) * 2,
            lambda a, b: a + b,
            bytes=3 * 2048 * 2048 * 2,
        ),
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--self-check", action="store_true", help="torch only: validate the harness on the GPU")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--out", default=os.environ.get("OUT", "bench/results"), help="folder for JSON, markdown, PNG")
    ap.add_argument("--with-host-overhead", action="store_true", help="let each call's host overhead into its time")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("harness: no CUDA GPU visible to torch", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if not args.self_check:
        ap.error("run a suite through its script (bench/memory_bound.py), or pass --self-check")
    report = run_suite(
        self_check_cases(),
        [eager(), torch_compile()],
        reps=args.reps,
        warmup=args.warmup,
        host_ahead=not args.with_host_overhead,
    )
    for p in write_report(report, args.out, "harness_self_check"):
        print("wrote", p)
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
