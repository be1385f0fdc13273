"""Generate docs/passes.md from the registered passes' docstrings and option declarations.

    python -m irforge.tools.gen_docs [PATH]            write PATH (default: docs/passes.md)
    python -m irforge.tools.gen_docs --check [PATH]    exit 1 if PATH is not what would be written

Only irforge's own passes are documented (plugins installed in the environment are left out).
"""

from __future__ import annotations

import argparse
import inspect
import sys

HEADER = """\
# Passes

Generated from the passes' docstrings and option declarations by `python -m irforge.tools.gen_docs`; edit the
passes, not this file. `irforge-opt --list-passes` shows the same, plugins included.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _levels(cls) -> str:
    return f"{cls.input_level} → {cls.leaves_level()}"


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


def render() -> str:
    from irforge.registry import registry

    reg = registry()
    ordered = [c for n, c in reg.passes().items() if reg.sources[("pass", n)].startswith("irforge.passes.")]
    lines = [HEADER, "| pass | levels | summary |", "|---|---|---|"]
    for cls in ordered:
        lines.append(f"| [`{cls.name}`](#{cls.name}) | {_levels(cls)} | {_cell(cls.summary())} |")
    lines.append("")
    for cls in ordered:
        lines += pass_section(cls)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m irforge.tools.gen_docs", description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default="docs/passes.md")
    ap.add_argument("--check", action="store_true", help="fail if the file is out of date instead of writing it")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        try:
            with open(args.path, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != text:
            sys.stderr.write(f"{args.path} is out of date: run python -m irforge.tools.gen_docs {args.path}\n")
            return 1
        return 0
    with open(args.path, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
