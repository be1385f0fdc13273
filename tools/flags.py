"""What irforge-opt and irforge share on the command line: MLIR's spellings and the instrumentation flags.

`ArgumentParser` reads a flag as `mlir-opt` users type it: `-pass-pipeline=...` (one dash, as LLVM's options are
spelled), `--mlir-print-ir-after-all`, `--mlir-timing`, `--mlir-print-debuginfo`, `--mlir-print-op-generic`; an unknown
flag gets a "did you mean". `add_instrumentation_arguments` and `instrumentations` are the debugging flags (print the
IR, diffs, timing, remarks, reproducers) and the pass-manager hooks they stand for.
"""

from __future__ import annotations

import argparse
import difflib
import sys

# MLIR's names for flags irforge spells otherwise (the rest only drop their `mlir-` prefix).
_MLIR_NAMES = {"--mlir-print-op-generic": "--generic"}


class ArgumentParser(argparse.ArgumentParser):
    def parse_known_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(self._mlir_spellings(args), namespace)

    def _long_options(self) -> set[str]:
        return {s for a in self._actions for s in a.option_strings if s.startswith("--")}

    def _mlir_spellings(self, args: list[str]) -> list[str]:
        known = self._long_options()
        out = []
        for i, arg in enumerate(args):
            if arg == "--":
                return out + args[i:]
            flag, eq, value = arg.partition("=")
            if flag.startswith("-") and not flag.startswith("--") and len(flag) > 2 and flag[1].isalpha():
                flag = "-" + flag  # `-pass-pipeline=...`; `-o`, `-vv` and `-p PIPE` are left alone
            flag = _MLIR_NAMES.get(flag) or (
                "--" + flag.removeprefix("--mlir-") if flag.startswith("--mlir-") else flag
            )
            out.append(flag + eq + value if flag in known else arg)
        return out

    def error(self, message: str):
        prefix = "unrecognized arguments: "
        if message.startswith(prefix):
            options = set(self._long_options())
            for a in self._actions:
                if isinstance(a, argparse._SubParsersAction):
                    for p in a.choices.values():
                        options |= {s for b in p._actions for s in b.option_strings if s.startswith("--")}
            hints = []
            for arg in message[len(prefix) :].split():
                close = difflib.get_close_matches("--" + arg.lstrip("-").split("=")[0], options, n=1)
                if arg.startswith("-") and close:
                    hints.append(f"'{arg}': did you mean '{close[0]}'?")
            if hints:
                message += " (" + "; ".join(hints) + ")"
        self.print_usage(sys.stderr)  # argparse's own exit code is 2, which irforge keeps for internal errors
        self.exit(1, f"{self.prog}: error: {message}\n")


def add_instrumentation_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("instrumentation")
    g.add_argument("--print-ir-before", default="", metavar="PASSES", help="print the IR before these passes")
    g.add_argument("--print-ir-after", default="", metavar="PASSES", help="print the IR after these passes")
    g.add_argument("--print-ir-after-all", action="store_true", help="print the IR after every pass")
    g.add_argument("--print-ir-after-change", action="store_true", help="print the IR after passes that changed it")
    g.add_argument("--print-ir-after-failure", action="store_true", help="print the IR after a pass fails")
    g.add_argument("--print-ir-diff", action="store_true", help="print a unified diff per pass that changed the IR")
    g.add_argument("--print-ir-tree-dir", default=None, metavar="DIR", help="write the IR after every pass to DIR")
    g.add_argument("--timing", action="store_true", help="report time per pass and per phase")
    g.add_argument(
        "--debug-only", default="", metavar="PASSES", help="print the remarks of these passes: what they decided, why"
    )
    g.add_argument("--debug", action="store_true", help="print the remarks of every pass")
    g.add_argument("--crash-reproducer", default=None, metavar="FILE", help="on a pass failure, write a reproducer")


def add_tuning_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        default=None,
        metavar="PATH",
        help="the tuning database whose schedules to replay (default: $IRFORGE_TUNE_DB, else "
        "~/.cache/irforge/tune.sqlite, when it exists)",
    )
    p.add_argument("--untuned", action="store_true", help="the heuristics' schedules, whatever `irforge tune` found")


def tuning_db(args) -> str | None:
    """The tuning database to replay (`--db`, `--untuned`): the one named, else the default one if `irforge tune`
    made it; None for none (or where a `--pass-pipeline` replaces the default lowering)."""
    import os

    from irforge.diagnostics import error
    from irforge.tune.db import default_path

    if args.untuned or getattr(args, "pass_pipeline", None) is not None:
        return None
    if args.db is not None:
        if not os.path.exists(args.db):
            raise error(f"--db {args.db}: no such tuning database")
        return args.db
    return "" if default_path().exists() else None


def add_model_arguments(p: argparse.ArgumentParser, title: str) -> argparse._ArgumentGroup:
    """The sizes a MODEL is compiled for (`irforge compile MODEL`, `irforge tune MODEL`)."""
    g = p.add_argument_group(title)
    g.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"], help="compute dtype (default: f32)")
    g.add_argument("--batch", type=int, default=1, help="sequences per batch (default: 1)")
    g.add_argument("--prompt-len", type=int, default=32, help="tokens of the prefill (default: 32)")
    g.add_argument("--max-len", type=int, default=None, help="tokens the KV cache holds (default: 2x the prompt)")
    return g


def names(csv: str) -> list[str]:
    return [x for x in csv.split(",") if x]


def check_pass_names(args) -> None:
    """Refuse an unknown pass name in `--print-ir-before/after` or `--debug-only` (it would silently print nothing)."""
    from irforge.diagnostics import error
    from irforge.registry import registry

    passes = registry().pass_names()
    for flag in ("print_ir_before", "print_ir_after", "debug_only"):
        for name in names(getattr(args, flag)):
            if name not in passes:
                close = difflib.get_close_matches(name, list(passes), n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                raise error(f"--{flag.replace('_', '-')}: unknown pass '{name}'{hint}")


def instrumentations(args, stream, timer, *, tree_dir: str | None = None) -> list:
    """The hooks the instrumentation flags ask for, in the order their output should appear (verification aside)."""
    from irforge import instrumentation as ins

    popts = {"stream": stream, "generic": args.generic, "debuginfo": args.print_debuginfo}
    hooks = []
    if args.print_ir_before or args.print_ir_after or args.print_ir_after_all or args.print_ir_after_change:
        hooks.append(
            ins.PrintIR(
                before=names(args.print_ir_before),
                after=names(args.print_ir_after),
                after_all=args.print_ir_after_all,
                after_change=args.print_ir_after_change,
                after_failure=args.print_ir_after_failure,
                **popts,
            )
        )
    elif args.print_ir_after_failure:
        hooks.append(ins.PrintIR(after_failure=True, **popts))
    if args.print_ir_diff:
        hooks.append(ins.PrintIRDiff(**popts))
    if args.debug or args.debug_only:
        hooks.append(ins.Remarks(None if args.debug else names(args.debug_only), stream=stream))
    tree_dir = tree_dir or args.print_ir_tree_dir
    if tree_dir:
        hooks.append(ins.IRTreeDir(tree_dir, generic=args.generic, debuginfo=args.print_debuginfo))
    if args.timing:
        hooks.append(ins.Timing(timer))
    hooks.append(ins.Reproducer(args.crash_reproducer, stream=stream))  # without a path: for internal errors only
    return hooks
