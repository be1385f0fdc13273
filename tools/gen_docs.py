"""Generate the reference pages from the code: docs/passes.md (every pass, from its docstring and option
declarations, and every named pipeline) and docs/ops/<dialect>.md (every op, from its class and its dialect's
grammar).

    python -m irforge.tools.gen_docs [DOCS]            write the pages under DOCS (default: docs)
    python -m irforge.tools.gen_docs --check [DOCS]    exit 1 if a page is not what would be written

Only irforge's own passes, pipelines and dialects are documented (plugins installed in the environment are left
out).
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from pathlib import Path

PASSES_HEADER = """\
# Passes

Generated from the passes' docstrings and option declarations by `python -m irforge.tools.gen_docs`; edit the
passes, not this file. `irforge-opt --list-passes` shows the same, plugins included. The named pipelines are at the
[end](#named-pipelines).
"""

OPS_HEADER = """\
# The `{name}` dialect: op reference

{summary}{level}.

Generated from the op classes and the dialect's grammar by `python -m irforge.tools.gen_docs`; edit those, not this
file.

Every op also has the generic form `"{name}.op"(%operands) ({{regions}}) {{attributes}} : (operand types) -> result
types`. Syntax rules are the dialect's lark grammar: `"word"` is a keyword, `[x]` optional, `x*` repeated, `|` a
choice; `value_use` is `%name`, `value_uses` a comma-separated list, `type`/`types` types, `attr` an attribute,
`dict_attr` `{{key = value, ...}}`, `symbol` `@name`, `region` `{{ ops }}`, `iexpr` an index expression. Upper-case
names are terminals, defined beside the rule that uses them.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _levels(cls) -> str:
    return f"{cls.input_level} → {cls.leaves_level()}"


# ---- passes ----------------------------------------------------------------------------------------------------
def pass_section(cls) -> list[str]:
    """The markdown of one pass: summary, description, levels, anchor and an options table."""
    from irforge.pass_manager import format_value

    doc = inspect.cleandoc(cls.__doc__ or "")
    summary, _, rest = doc.partition("\n\n")
    out = [f"## `{cls.name}`", "", " ".join(summary.split()), ""]
    if rest.strip():
        out += [rest.strip(), ""]
    runs_on = "the module" if cls.anchor == "builtin.module" else f"each `{cls.anchor}` op"
    out += [f"- levels: {_levels(cls)}", f"- runs on: {runs_on}"]
    if cls.options:
        out += ["", "| option | type | default | domain | description |", "|---|---|---|---|---|"]
        for opt in cls.options.values():
            domain = str(opt.domain) if opt.domain is not None else ""
            row = [f"`{opt.name}`", opt.type_name(), f"`{format_value(opt.default)}`", domain, opt.help]
            out.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return [*out, ""]


def _pipeline_section(p) -> list[str]:
    comments = [ln.lstrip("#/ ").rstrip() for ln in p.text.splitlines() if ln.lstrip().startswith(("#", "//"))]
    elements = [ln.strip().rstrip(",") for ln in p.text.splitlines() if ln.strip() and ln.strip()[0] not in "#/"]
    return [f"### `{p.name}`", "", " ".join(comments), "", "`" + ",".join(elements) + "`", ""]


def render_passes() -> str:
    from irforge.registry import registry

    reg = registry()
    ordered = [c for n, c in reg.passes().items() if reg.sources[("pass", n)].startswith("irforge.passes.")]
    lines = [PASSES_HEADER, "| pass | levels | summary |", "|---|---|---|"]
    for cls in ordered:
        lines.append(f"| [`{cls.name}`](#{cls.name}) | {_levels(cls)} | {_cell(cls.summary())} |")
    lines.append("")
    for cls in ordered:
        lines += pass_section(cls)
    own = [p for p in reg.pipelines().values() if reg.sources[("pipeline", p.name)].startswith(_PIPELINES_DIR)]
    lines += [
        "## Named pipelines",
        "",
        "Files in `pipelines/`; a pipeline may name passes and other pipelines. `irforge compile --ir LEVEL` runs",
        "`torch-to-cuda` up to the step that reaches LEVEL.",
        "",
    ]
    for p in sorted(own, key=lambda p: p.name):
        lines += _pipeline_section(p)
    return "\n".join(lines).rstrip("\n") + "\n"


_PIPELINES_DIR = str(Path(__file__).resolve().parent.parent / "pipelines")


# ---- ops -------------------------------------------------------------------------------------------------------
def _grammar_rules(grammar: str) -> dict[str, str]:
    """{rule or terminal name: its definition on one line} of a lark grammar."""
    out: dict[str, str] = {}
    name = None
    for line in grammar.splitlines():
        m = re.match(r"\??([A-Za-z_][A-Za-z_0-9]*)(\.\d+)?\s*:(.*)", line)
        if m and not line.startswith("%"):
            name = m.group(1)
            out[name] = line.strip()
        elif name and line[:1] in (" ", "|") and line.strip() and not line.strip().startswith("//"):
            out[name] += " " + line.strip()
        else:
            name = None
    # lark's `-> alias` names the tree node, nothing a reader types
    return {k: re.sub(r"\s+", " ", re.sub(r"\s*->\s*\w+", "", v)) for k, v in out.items()}


def _syntax(op, rules: dict[str, str], prefix: str) -> list[str]:
    """The grammar rule that parses `op` (the one starting with its name, or with a terminal that matches it) and the
    dialect's own rules and terminals it refers to, transitively."""
    names = {op.name + "any" if op.name.endswith(".") else op.name, op.name.removeprefix("builtin.")}

    def matches(terminal: str) -> bool:
        body = rules[terminal].split(":", 1)[1]
        regex = re.search(r"/(.*)/", body)
        return bool(set(re.findall(r'"([^"]*)"', body)) & names) or bool(
            regex and any(re.fullmatch(regex.group(1), n) for n in names)
        )

    def parses(rule: str) -> bool:
        first = (rules[rule].split(":", 1)[1].split() or [""])[0]
        if first.startswith('"'):
            return first.strip('"') in names
        return first in rules and first.isupper() and matches(first)

    start = next((r for r in rules if not r.isupper() and parses(r)), None)
    if start is None:
        return []
    seen, order, todo = set(), [], [start]
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        order.append(rules[name])
        body = re.sub(r'"[^"]*"|/[^/]*/', "", rules[name].split(":", 1)[1])
        todo += [w for w in re.findall(r"[A-Za-z_][A-Za-z_0-9]*", body) if w in rules and w.lower().startswith(prefix)]
    return order


def _type_name(t) -> str:
    if t is None:
        return "any"
    if isinstance(t, tuple):
        return " \\| ".join(_type_name(x) for x in t)
    return getattr(t, "__name__", str(t))


def _names(names) -> str:
    if names is None:
        return "any"
    if not names:
        return "none"
    return ", ".join(f"`{n.lstrip('*')}` (variadic)" if n.startswith("*") else f"`{n}`" for n in names)


def op_section(op, rules: dict[str, str], prefix: str) -> list[str]:
    """The markdown of one op: description, operands, results, attributes, regions, traits and syntax."""
    doc = inspect.cleandoc(op.__doc__ or "")
    family = op.name.endswith(".")
    out = [f"## `{op.name}{'*' if family else ''}`", ""]
    if doc:
        out += [doc, ""]
    attrs = [f"`{k}`: {_type_name(t)}" for k, t in op.attribute_types.items()]
    attrs += [f"`{k}`: {_type_name(t)} (optional)" for k, t in op.optional_attributes.items()]
    regions = "any number" if op.num_regions is None else str(op.num_regions)
    rows = [
        ("operands", _names(op.operand_names)),
        ("results", _names(op.result_names)),
        ("attributes", ", ".join(attrs) or "none"),
        ("regions", regions),
        ("traits", ", ".join(sorted(op.traits)) or "none"),
    ]
    if op.anchor_aliases:
        rows.append(("pipeline anchor", ", ".join(f"`{a}(...)`" for a in op.anchor_aliases)))
    out += ["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), ""]
    syntax = _syntax(op, rules, prefix)
    if syntax:
        out += ["```", *syntax, "```", ""]
    elif op.print_custom is None:
        out += ["Generic form only.", ""]
    return out


def render_ops(dialect, rules: dict[str, str]) -> str:
    """The page of one dialect; `rules` are the grammar rules of every dialect (func's ops parse with builtin's)."""
    level = f" (the {dialect.level} level)" if dialect.level else ""
    summary = dialect.summary[:1].upper() + dialect.summary[1:]
    lines = [OPS_HEADER.format(name=dialect.name, summary=summary, level=level)]
    for op in (*dialect.ops, *dialect.op_families):
        lines += op_section(op, rules, dialect.name + "_")
    return "\n".join(lines).rstrip("\n") + "\n"


def _own_dialects():
    from irforge.registry import registry

    reg = registry()
    return [
        d
        for name, d in reg.dialects().items()
        if reg.sources[("dialect", name)] == "irforge.builtin"
        or reg.sources[("dialect", name)].startswith("irforge.dialects.")
    ]


def render_ops_index(dialects) -> str:
    lines = [
        "# Op reference",
        "",
        "Every op of irforge's dialects: operands, results, attributes, regions, traits and syntax, generated from the",
        "code by `python -m irforge.tools.gen_docs`. The levels' own pages (`docs/dialects/`) say what the ops mean",
        "together.",
        "",
        "| dialect | level | ops | summary |",
        "|---|---|---:|---|",
    ]
    for d in dialects:
        lines.append(
            f"| [`{d.name}`]({d.name}.md) | {d.level or '-'} | {len(d.ops) + len(d.op_families)} | {d.summary} |"
        )
    return "\n".join(lines) + "\n"


def pages() -> dict[str, str]:
    """{path under the docs folder: text} of every generated page."""
    dialects = _own_dialects()
    out = {"passes.md": render_passes(), "ops/README.md": render_ops_index(dialects)}
    rules = {k: v for d in dialects for k, v in _grammar_rules(d.grammar).items()}
    for d in dialects:
        out[f"ops/{d.name}.md"] = render_ops(d, rules)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m irforge.tools.gen_docs", description=__doc__.splitlines()[0])
    ap.add_argument("docs", nargs="?", default="docs", help="the docs folder (default: docs)")
    ap.add_argument("--check", action="store_true", help="fail if a page is out of date instead of writing it")
    args = ap.parse_args(argv)
    root = Path(args.docs)
    stale = []
    for rel, text in pages().items():
        path = root / rel
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if stale:
        sys.stderr.write(f"out of date: {', '.join(stale)}: run python -m irforge.tools.gen_docs {args.docs}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
