"""What `irforge tune` shows: a live table while it runs (kernel i/N, candidates measured, pruned and failed, the
best time so far against the heuristic's), then a ranked table per kernel and the winning `tune` attributes;
`--show` lists what the database holds for a program."""

from __future__ import annotations

import math
import threading

from irforge.attributes import DictAttr
from irforge.printer import format_attr

from .space import tune_attr

TOP = 5  # configurations a kernel's table shows


def _us(s: float | None) -> str:
    return f"{s * 1e6:.1f}" if s is not None and math.isfinite(s) else "-"


def _gain(base: float | None, best: float | None) -> str:
    return f"{base / best:.2f}x" if base and best else "-"


def options_text(point: dict) -> str:
    """A point as `pass.option=value` pairs ("heuristic" for the pipeline's own values)."""
    parts = [f"{p.removeprefix('tile-')}.{k}={format_attr(v)}" for p, opts in point.items() for k, v in opts.items()]
    return " ".join(parts) or "heuristic"


def tune_text(point: dict) -> str:
    return f"tune = {format_attr(tune_attr(point))}" if point else "(the heuristic's schedule: no tune attribute)"


def _row(r) -> tuple:
    best = r.best()
    return (
        r.task.name + (f" (x{len(r.task.uses)})" if len(r.task.uses) > 1 else ""),
        r.status,
        f"{r.measured}/{r.pruned}/{r.failed}",
        _us(r.baseline.median_s if r.baseline else None),
        _us(best.median_s if best else None),
        _gain(r.baseline.median_s if r.baseline else None, best.median_s if best else None),
        f"{r.seconds:.0f}s" if r.seconds else "",
        r.detail,
    )


_COLUMNS = ("kernel", "status", "measured/pruned/failed", "heuristic us", "best us", "gain", "time", "")


class Live:
    """A rich live table, one row per kernel, redrawn as results come."""

    def __init__(self, console):
        from rich.live import Live as RichLive

        self.console = console
        self.rows: dict = {}
        self.lock = threading.Lock()
        self.live = RichLive(console=console, get_renderable=self._table, refresh_per_second=4)

    def _table(self):
        from rich.table import Table

        with self.lock:
            rows = list(self.rows.values())
        done = sum(r[1] in ("tuned", "cached", "failed", "compiled") for r in rows)
        table = Table(title=f"irforge tune: kernel {min(done + 1, len(rows))}/{len(rows)}", title_justify="left")
        for c in _COLUMNS:
            table.add_column(c, justify="right" if c.endswith(("us", "gain", "time")) else "left")
        for row in rows:
            table.add_row(*row)
        return table

    def update(self, r) -> None:
        with self.lock:
            self.rows[id(r)] = _row(r)

    def __enter__(self):
        self.live.start()
        return self

    def __exit__(self, *exc):
        self.live.stop()


class Lines:
    """Without a terminal: a line per kernel when it is done (and per candidate with -v)."""

    def __init__(self, stream, verbose: int = 0):
        self.stream, self.verbose = stream, verbose
        self.lock = threading.Lock()
        self.seen: dict = {}

    def update(self, r) -> None:
        with self.lock:
            shown = self.seen.get(id(r), 0)
            if self.verbose:
                for c in r.candidates[shown:]:
                    why = f" ({c.detail})" if c.detail and c.status != "ok" else ""
                    self.stream.write(
                        f"  {r.task.name}: {_us(c.median_s)} us {c.status}{why}: {options_text(c.point)}\n"
                    )
                self.seen[id(r)] = len(r.candidates)
            if r.status in ("tuned", "cached", "failed", "compiled"):
                name, status, counts, base, best, gain, secs, detail = _row(r)
                self.stream.write(f"{name}: {status} {counts} measured/pruned/failed, heuristic {base} us, best "
                                  f"{best} us ({gain}) {secs} {detail}".rstrip() + "\n")  # fmt: skip
            self.stream.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def report(results, out, verbose: int = 0, compiled_only: bool = False) -> None:
    """A ranked table per tuned kernel, then the winners as `tune` attributes."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out, width=160)
    for r in results:
        if r.status not in ("tuned", "compiled"):
            console.print(f"{r.task.name}: {r.status}" + (f" ({r.detail})" if r.detail else ""), highlight=False)
            continue
        what = "predicted" if compiled_only else "median"
        title = (
            f"{r.task.name}: {r.measured} {'compiled' if compiled_only else 'measured'}, {r.pruned} pruned, "
            f"{r.failed} failed, {r.refused} refused and {r.merged} merged values in the tree, {r.unlikely} left out "
            f"as predicted far slower than the heuristic's; "
            f"{r.decisions} decisions, {r.space_size:.3g} points; {r.seconds:.0f} s"
            + ("; the prior was trusted (PUCT)" if r.reliable else "")
        )
        table = Table(title=title, title_justify="left")
        for c in ("#", f"{what} us", "vs heuristic", "status", "options"):
            table.add_column(c, justify="right" if c != "options" else "left")
        final = r.confirmed or r.candidates
        base = r.baseline.median_s if r.baseline else None
        ranked = sorted((c for c in final if c.status == "ok"), key=lambda c: c.median_s)
        for i, c in enumerate(ranked[: TOP if not verbose else None]):
            table.add_row(str(i + 1), _us(c.median_s), _gain(base, c.median_s), c.phase, options_text(c.point))
        failed = [c for c in r.candidates if c.status not in ("ok",)]
        for c in failed[: TOP if not verbose else None]:
            table.add_row("", "", "", c.status, f"{options_text(c.point)}: {c.detail}")
        console.print(table)
        if r.winner is not None:
            console.print(f"  winner: {tune_text(r.winner.point)}", highlight=False)
            if len(r.task.uses) > 1:
                console.print(f"  also for: {', '.join(r.task.uses[1:])}", highlight=False)
    if not compiled_only and any(r.status == "tuned" for r in results):
        console.print(
            "`irforge compile` and `irforge run` replay these schedules (`--untuned`: the heuristics'); "
            "`irforge compile ... --ir loop` prints the kernels with their tune attributes, and "
            "`irforge-opt FILE --pass-pipeline=loop-to-tile,tile-to-kernel,kernel-to-cuda` lowers them.",
            highlight=False,
        )


def show(db, programs, suffix, arch, out) -> None:
    """What the database holds: for the programs' kernels, or every entry."""
    from rich.console import Console
    from rich.table import Table

    from .db import Key
    from .space import isolate, kernel_key, kernels_of, space_version

    console = Console(file=out, width=160)
    if db is None:
        console.print("no tuning database yet (`irforge tune` makes one)")
        return
    version = space_version(suffix)
    table = Table(title=f"{db.path} ({arch}, schedule version {version})", title_justify="left")
    for c in ("kernel", "hash", "heuristic us", "tuned us", "gain", "candidates", "tuned", "tune"):
        table.add_column(c)
    if programs:
        for name, module in programs:
            for k in kernels_of(module):
                e = db.entry(Key(kernel_key(isolate(k)), arch, version))
                label = f"{name}/{k.attributes['sym_name']}"
                if e is None:
                    table.add_row(label, "", "", "", "", "", "not tuned", "")
                else:
                    table.add_row(label, *_entry_cells(e))
    else:
        for e in db.entries():
            stale = "" if e.key.version == version and e.key.arch == arch else " (other arch or schedule)"
            table.add_row(e.name + stale, *_entry_cells(e))
    console.print(table)


def _entry_cells(e) -> tuple:
    return (
        e.key.short(),
        _us(e.baseline_s),
        _us(e.best_s),
        _gain(e.baseline_s, e.best_s),
        str(e.candidates),
        (e.tuned_at or "")[:16],
        format_attr(DictAttr({p: DictAttr(o) for p, o in e.winner.items()})) if e.winner else "heuristic",
    )
