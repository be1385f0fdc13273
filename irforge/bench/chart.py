"""The PNG chart of a bench report: each case's speedup over eager (log scale), one bar per system, the cases
grouped by family and sorted within it; rows a system did not time carry its status instead of a bar. Needs
matplotlib (`pip install -e '.[bench]'`); without it a run writes JSON and markdown, and `irforge bench --merge`
draws the chart later on a machine that has it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from .report import primary, systems_of

_COLORS = ["#2a6fc9", "#e08a1e", "#3a9d50", "#b03aa0", "#777777"]


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def ratio_chart(report: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    systems = [s for s in systems_of(report) if s != "eager"]
    main = primary(report)
    families = list(dict.fromkeys(r["family"] for r in report["rows"]))
    rows = []
    for fam in families:
        members = [r for r in report["rows"] if r["family"] == fam]
        rows.append((fam, sorted(members, key=lambda r: r["systems"].get(main, {}).get("speedup_vs_eager", 0.0))))
    n = sum(len(m) for _, m in rows) + len(rows)
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.22 * n * max(1, len(systems) * 0.6)))
    h = 0.8 / max(len(systems), 1)
    y, ticks, labels, lo, hi = 0.0, [], [], 0.5, 2.0
    for fam, members in rows:
        ax.text(0.005, y, fam, fontweight="bold", va="center", ha="left", transform=ax.get_yaxis_transform())
        ax.axhline(y + 0.5, color="#dddddd", lw=0.8)
        y += 1
        for r in members:
            for k, s in enumerate(systems):
                e = r["systems"].get(s, {})
                ratio = e.get("speedup_vs_eager")
                yy = y + (k - (len(systems) - 1) / 2) * h
                if ratio:  # bars grow from 1x: left for slowdowns, right for speedups
                    ax.barh(yy, ratio - 1, height=h, left=1, color=_COLORS[k % len(_COLORS)], label=s)
                    lo, hi = min(lo, ratio), max(hi, ratio)
                else:
                    ax.text(1.0, yy, f" {s}: {e.get('status', 'absent')}", fontsize=6, va="center", color="#b00000")
            ticks.append(y)
            labels.append(r["id"])
            y += 1
    ax.set_xscale("log")
    ax.set_xlim(lo / 1.5, hi * 1.5)
    times = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x")
    ax.xaxis.set_major_formatter(times)
    ax.xaxis.set_minor_formatter(times)
    ax.axvline(1.0, color="#b00000", lw=1)
    ax.set_yticks(ticks, labels, fontsize=7)
    ax.set_ylim(y, -1)
    ax.set_xlabel("speedup over eager (log scale; the red line is 1x)")
    env = report["runs"][0]["environment"]
    ax.set_title(f"irforge bench {report['suite']}: {env.get('gpu')}, irforge {env.get('irforge revision')}")
    handles, names = ax.get_legend_handles_labels()
    unique = dict(zip(names, handles))
    if unique:
        ax.legend(unique.values(), unique.keys(), loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
