"""Bench results: the JSON a run writes, what is derived from it (floors, ratios, % of the ceilings, summaries), the
markdown table (worst case first), merging partial runs and comparing two runs.

A results file holds one suite: `runs` (each with its environment, settings and measured ceilings) and `rows`
(one per case, each naming the run that measured it). Everything derived is recomputed from the medians and the
ceilings whenever a file is written, so merged files stay consistent.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from irforge.diagnostics import error

SCHEMA = "irforge-bench/1"
METHOD_REPS = 100  # runs per median the method asks for; rows with fewer are marked
BASES = ("eager", "torch.compile")
# worst first: failures, then timed rows by ratio, then rows that say nothing about irforge
_RANK = {"wrong": 0, "error": 1, "ok": 2, "not run": 3, "skipped": 4}


def new_report(suite: str, environment: dict, settings: dict, ceilings: dict, rows: list) -> dict:
    report = {
        "schema": SCHEMA,
        "suite": suite,
        "runs": [{"environment": environment, "settings": settings, "ceilings": ceilings}],
        "rows": [dict(r, run=0) for r in rows],
    }
    return finish(report)


def load(path: str | Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise error(f"{path} is not JSON: {e.msg} (line {e.lineno})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise error(f'{path} is not an irforge bench results file (no "schema": "{SCHEMA}")')
    return data


def systems_of(report: dict) -> list[str]:
    return list(dict.fromkeys(n for r in report["rows"] for n in r["systems"]))


def primary(report: dict) -> str | None:
    """The system the table is about: the first irforge one (else the first that is not eager)."""
    names = [n for n in systems_of(report) if n != "eager"]
    return next((n for n in names if n.startswith("irforge")), names[0] if names else None)


# ---- derived values --------------------------------------------------------------------------------------------
def finish(report: dict) -> dict:
    """Fill each row's floor and bound and each system's ratios and % of ceiling; then the summary."""
    for row in report["rows"]:
        ceilings = report["runs"][row.get("run", 0)]["ceilings"]
        _derive(row, ceilings)
    report["summary"] = summary(report)
    return report


def _derive(row: dict, ceilings: dict) -> None:
    bw = ceilings.get("copy_bytes_per_s")
    rate = ceilings.get(f"{row['dtype']}_matmul_flop_per_s")
    mem_s = row["bytes"] / bw if row.get("bytes") and bw else 0.0
    mm_s = row["flops"] / rate if row.get("flops") and rate else 0.0
    row["bound"] = "compute" if mm_s > mem_s else "memory"
    row["floor_us"] = max(mem_s, mm_s) * 1e6 if (mem_s or mm_s) else None
    entries = row["systems"]
    for name, e in entries.items():
        for k in [k for k in e if k.startswith(("speedup_vs_", "pct_"))]:
            del e[k]
        ms = e.get("median_ms")
        if ms is None:
            continue
        if mem_s:
            e["pct_copy_bw"] = 100 * mem_s / (ms / 1e3)
        if mm_s:
            e["pct_matmul_rate"] = 100 * mm_s / (ms / 1e3)
        for base in BASES:
            b = entries.get(base, {}).get("median_ms")
            if b and name != base:
                e[f"speedup_vs_{base}"] = b / ms


def pct_of_bound(row: dict, entry: dict) -> float | None:
    return entry.get("pct_matmul_rate" if row["bound"] == "compute" else "pct_copy_bw")


def geomean(xs) -> float:
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def summary(report: dict) -> dict:
    """Per system: status counts, and against each base it ran beside: geomean, cases >= 1x, worst and best,
    and the same per family."""
    out = {}
    rows = report["rows"]
    for name in systems_of(report):
        statuses = [r["systems"].get(name, {}).get("status", "absent") for r in rows]
        s = {"status": {k: statuses.count(k) for k in dict.fromkeys(statuses)}, "cases": len(rows)}
        for base in BASES:
            if base == name or base not in systems_of(report):
                continue
            key = f"speedup_vs_{base}"
            pts = [(r["id"], r["family"], r["systems"][name][key]) for r in rows if key in r["systems"].get(name, {})]
            if not pts:
                continue
            worst, best = min(pts, key=lambda p: p[2]), max(pts, key=lambda p: p[2])
            families = {}
            for fam in dict.fromkeys(p[1] for p in pts):
                fp = [p[2] for p in pts if p[1] == fam]
                families[fam] = {"geomean": geomean(fp), "cases": len(fp), "at_least_1x": sum(x >= 1 for x in fp)}
            s[f"vs {base}"] = {
                "geomean": geomean(p[2] for p in pts),
                "cases": len(pts),
                "at_least_1x": sum(p[2] >= 1 for p in pts),
                "worst": {"id": worst[0], "ratio": worst[2]},
                "best": {"id": best[0], "ratio": best[2]},
                "families": families,
            }
        out[name] = s
    return out


def worst_first(report: dict) -> list[dict]:
    name = primary(report)

    def key(r):
        e = r["systems"].get(name, {})
        return (_RANK.get(e.get("status"), 5), e.get("speedup_vs_eager", math.inf))

    return sorted(report["rows"], key=key)


# ---- writing ---------------------------------------------------------------------------------------------------
def write(report: dict, out_dir: str | Path, chart: bool = True) -> list[Path]:
    """`<suite>.json` and `<suite>.md` (and `<suite>.png` when matplotlib is installed) in `out_dir`."""
    from . import chart as charts

    finish(report)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    base = out / report["suite"]
    paths = [base.with_suffix(".json"), base.with_suffix(".md")]
    tmp = paths[0].with_suffix(".json.tmp")  # a run killed while writing keeps the previous file whole
    tmp.write_text(json.dumps(report, indent=1) + "\n")
    os.replace(tmp, paths[0])
    paths[1].write_text(markdown(report))
    if chart and charts.available():
        paths.append(charts.ratio_chart(report, base.with_suffix(".png")))
    return paths


def _num(x: float, unit: float = 1.0) -> str:
    v = x / unit
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}x" if x < 0.1 else f"{x:.2f}x"


def _time_cell(row: dict, e: dict) -> str:
    if "median_ms" not in e:
        detail = f": {e['detail']}" if e.get("detail") else ""
        return f"**{e.get('status', '-')}**{detail}".replace("|", "\\|")
    pct = pct_of_bound(row, e)
    cell = f"{e['median_ms'] * 1e3:.1f}" + (f" ({pct:.0f}%)" if pct is not None else "")
    return cell + (f" [{e['reps']} runs]" if e["reps"] < METHOD_REPS else "")


def header_lines(report: dict) -> list[str]:
    out = []
    for i, run in enumerate(report["runs"]):
        env, c, st = run["environment"], run["ceilings"], run["settings"]
        tag = f"run {i + 1}: " if len(report["runs"]) > 1 else ""
        out.append(
            f"- {tag}{env.get('gpu')}, driver {env.get('driver')}, torch {env.get('torch')} "
            f"(CUDA {env.get('cuda (torch)')}), irforge {env.get('irforge revision')}, {env.get('date')}"
        )
        out.append(
            f"  - ceilings measured in the run: copy {c['copy_bytes_per_s'] / 1e12:.2f} TB/s (read + write), "
            f"f32 matmul {c['f32_matmul_flop_per_s'] / 1e12:.1f} TFLOP/s (no TF32), "
            f"bf16 matmul {c['bf16_matmul_flop_per_s'] / 1e12:.0f} TFLOP/s"
            + (f", f16 matmul {c['f16_matmul_flop_per_s'] / 1e12:.0f} TFLOP/s" if "f16_matmul_flop_per_s" in c else "")
        )
        left_out = ", ".join(st.get("left_out", [])) or "nothing"
        out.append(
            f"  - systems: {', '.join(st['systems'])}; left out: {left_out}; {st['timing']}; "
            f"median of up to {st['reps']} runs per system, within a {st['max_seconds_per_case']:g} s budget per "
            f"case; [n runs] marks fewer than the {METHOD_REPS} the method asks for"
        )
    return out


def summary_lines(report: dict) -> list[str]:
    out = []
    for name, s in report["summary"].items():
        if name == "eager":
            continue
        st = ", ".join(f"{v} {k}" for k, v in s["status"].items())
        out.append(f"- **{name}**: {st} (of {s['cases']} cases)")
        for base in BASES:
            v = s.get(f"vs {base}")
            if v is None:
                continue
            out.append(
                f"  - vs {base}: geomean **{_ratio(v['geomean'])}** over {v['cases']} cases, "
                f"{v['at_least_1x']} at >= 1x, worst {_ratio(v['worst']['ratio'])} ({v['worst']['id']}), "
                f"best {_ratio(v['best']['ratio'])} ({v['best']['id']})"
            )
            fams = "; ".join(
                f"{f} {_ratio(x['geomean'])} ({x['at_least_1x']}/{x['cases']} >= 1x)" for f, x in v["families"].items()
            )
            out.append(f"  - per family vs {base}: {fams}")
    return out


def readme_row(report: dict, md_path: str) -> str:
    """The README's results line for this suite (the primary system against eager and torch.compile)."""
    name = primary(report)
    s = report["summary"].get(name, {})
    env = report["runs"][0]["environment"]
    vs_eager, vs_compile = s.get("vs eager"), s.get("vs torch.compile")
    cells = [
        report["suite"],
        env.get("gpu", "?"),
        env.get("irforge revision", "?"),
        _ratio(vs_eager["geomean"]) if vs_eager else "-",
        _ratio(vs_compile["geomean"]) if vs_compile else "left out",
        f"{vs_eager['at_least_1x']} of {s['cases']}" if vs_eager else "-",
        f"{vs_eager['worst']['id']} ({_ratio(vs_eager['worst']['ratio'])})" if vs_eager else "-",
        f"[{Path(md_path).name}]({md_path})",
    ]
    return "| " + " | ".join(cells) + " |"


def markdown(report: dict) -> str:
    finish(report)
    systems = systems_of(report)
    ratios = [(s, b) for b in BASES for s in systems if s != b and b in systems and s not in BASES]
    lines = [f"# irforge bench: suite `{report['suite']}`", "", *header_lines(report), "", "## Summary", ""]
    lines += summary_lines(report)
    head = ["case", "shapes", "MB", "GFLOP", "floor µs", *[f"{s} µs (% of bound)" for s in systems]]
    head += [f"{s} / {b}" for s, b in ratios]
    lines += [
        "",
        "## Cases, worst first",
        "",
        "Times are medians in µs; % is of the copy bandwidth for memory-bound rows, of the matmul rate of the "
        "row's type for compute-bound ones; ratios are speedups (the base's time over the system's).",
        "",
        "| " + " | ".join(head) + " |",
        "|---|---|" + "---:|" * (len(head) - 2),
    ]
    for r in worst_first(report):
        cells = [
            r["id"],
            r["shapes"],
            _num(r["bytes"], 1e6) if r.get("bytes") else "-",
            _num(r["flops"], 1e9) if r.get("flops") else "-",
            f"{r['floor_us']:.1f}" if r.get("floor_us") else "-",
        ]
        cells += [_time_cell(r, r["systems"].get(s, {})) for s in systems]
        cells += [_ratio(r["systems"].get(s, {}).get(f"speedup_vs_{b}")) for s, b in ratios]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ---- merge and compare -----------------------------------------------------------------------------------------
def complete(row: dict) -> bool:
    """Whether every system of the row ran (none is \"not run\")."""
    return all(e.get("status") != "not run" for e in row["systems"].values())


def merge(reports: list[dict], order: list[str] | None = None) -> tuple[dict, list[str]]:
    """One report from partial runs of a suite (split by --cases, or resumed); a case measured in several keeps
    the later measurement. Returns the report and notes on what was replaced."""
    suites = {r["suite"] for r in reports}
    if len(suites) != 1:
        raise error(f"cannot merge results of different suites ({', '.join(sorted(suites))})")
    merged = {"schema": SCHEMA, "suite": suites.pop(), "runs": [], "rows": []}
    by_id: dict[str, dict] = {}
    notes = []
    for rep in reports:
        offset = len(merged["runs"])
        merged["runs"] += rep["runs"]
        for row in rep["rows"]:
            row = dict(row, run=row.get("run", 0) + offset)
            old = by_id.get(row["id"])
            if old is not None and complete(old):
                if not complete(row):
                    continue
                notes.append(f"{row['id']}: measured in more than one run; keeping the later one")
            by_id[row["id"]] = row
    rank = {cid: i for i, cid in enumerate(order or [])}
    merged["rows"] = sorted(by_id.values(), key=lambda r: rank.get(r["id"], len(rank)))
    return finish(merged), notes


def compare(a: dict, b: dict, a_name: str = "A", b_name: str = "B") -> str:
    """The per-case change from run A to run B, as markdown: largest slowdown first."""
    finish(a)
    finish(b)
    rows_a = {r["id"]: r for r in a["rows"]}
    lines = [f"# irforge bench compare: suite `{b['suite']}`", ""]
    for tag, rep, path in (("A", a, a_name), ("B", b, b_name)):
        env = rep["runs"][0]["environment"]
        lines.append(f"- {tag}: {path} (irforge {env.get('irforge revision')}, {env.get('gpu')}, {env.get('date')})")
    changes, status_lines = [], []
    for rb in b["rows"]:
        ra = rows_a.get(rb["id"])
        if ra is None:
            continue
        for name, eb in rb["systems"].items():
            ea = ra["systems"].get(name)
            if ea is None:
                continue
            if ea.get("status") != eb.get("status"):
                detail = f" ({eb['detail']})" if eb.get("detail") else ""
                status_lines.append(f"- {rb['id']} {name}: {ea.get('status')} -> {eb.get('status')}{detail}")
            if "median_ms" in ea and "median_ms" in eb:
                changes.append((rb["id"], name, ea["median_ms"], eb["median_ms"]))
    only = sorted(set(rows_a) ^ {r["id"] for r in b["rows"]})
    lines.append("")
    for name in dict.fromkeys(c[1] for c in changes):
        xs = [ta / tb for _, n, ta, tb in changes if n == name]
        faster, slower = sum(x > 1.05 for x in xs), sum(x < 1 / 1.05 for x in xs)
        lines.append(
            f"- {name}: geomean speedup B over A {_ratio(geomean(xs))} over {len(xs)} cases; "
            f"{faster} faster and {slower} slower by more than 5%"
        )
    if only:
        lines.append(f"- in one run only: {', '.join(only)}")
    if status_lines:
        lines += ["", "## Status changes", "", *status_lines]
    lines += [
        "",
        "## Times, largest slowdown first",
        "",
        "| case | system | A µs | B µs | B over A |",
        "|---|---|---:|---:|---:|",
    ]
    for cid, name, ta, tb in sorted(changes, key=lambda c: c[2] / c[3]):
        lines.append(f"| {cid} | {name} | {ta * 1e3:.1f} | {tb * 1e3:.1f} | {_ratio(ta / tb)} |")
    return "\n".join(lines) + "\n"
