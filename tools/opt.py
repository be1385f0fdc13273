"""irforge-opt: run pass pipelines on textual IR, MLIR's `mlir-opt` for irforge.

    irforge-opt input.ir --pass-pipeline='cse,dce' -o out.ir
    irforge-opt input.ir --pass-pipeline=torch-to-tensor --print-ir-diff

`main(argv, stdin=..., stdout=..., stderr=...)` is the in-process API the tests use. Nothing heavy is imported before
the arguments are parsed, so `--help` is instant.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import NoReturn

from .flags import ArgumentParser, add_instrumentation_arguments, check_pass_names, instrumentations

_EXPECTED = re.compile(r"//\s*expected-(error|warning|note|remark)(?:@(above|below|[+-]\d+))?\s*\{\{(.*?)\}\}")
_SPLIT = re.compile(r"^// -----.*$", re.M)


def _arg_parser() -> argparse.ArgumentParser:
    ap = ArgumentParser(
        prog="irforge-opt",
        description="Run irforge pass pipelines on textual IR.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Pipelines use MLIR syntax: 'cse,dce', 'kernel(tile-blockify{threads=128})'. See --list-passes.",
    )
    ap.add_argument("input", nargs="?", default=None, help="input .ir file, or - for stdin (default: stdin)")
    ap.add_argument("-o", dest="output", default="-", help="output file (default: stdout)")
    ap.add_argument("-p", "--pass-pipeline", default="", metavar="PIPE", help="the pipeline to run")
    ap.add_argument("--list-passes", action="store_true", help="list passes with summaries, options and levels")
    ap.add_argument("--list-dialects", action="store_true", help="list the loaded dialects")
    ap.add_argument(
        "--dump-pass-pipeline",
        action="store_true",
        help="print the fully expanded pipeline to stderr (with no input file given, only that)",
    )
    ap.add_argument("--generic", action="store_true", help="print every op in the generic form")
    ap.add_argument("--print-debuginfo", action="store_true", help="print op locations")
    ap.add_argument("--split-input-file", action="store_true", help="process chunks separated by '// -----' alone")
    ap.add_argument("--verify-diagnostics", action="store_true", help="check '// expected-error {{...}}' annotations")
    ap.add_argument("--no-verify-each", action="store_true", help="do not verify the IR after every pass")
    ap.add_argument("--allow-unregistered-dialect", action="store_true", help="accept ops no dialect defines")
    add_instrumentation_arguments(ap)
    ap.add_argument("--run-reproducer", action="store_true", help="take the pipeline from the reproducer header")
    g = ap.add_mutually_exclusive_group()
    g.add_argument(
        "--check-numerics",
        action="store_true",
        help="run the reference interpreters before and after the pipeline on random inputs; report a difference",
    )
    g.add_argument(
        "--bisect-numerics",
        action="store_true",
        help="as --check-numerics after every pass: name the first that differs",
    )
    return ap


def main(argv=None, *, stdin=None, stdout=None, stderr=None) -> int:
    from .driver import guarded

    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _arg_parser().parse_args(argv)
    return guarded("irforge-opt", argv, lambda: _run(args, stdin, stdout, stderr), stderr)


def command() -> NoReturn:
    """The `irforge-opt` executable (`main` is the in-process API)."""
    from .driver import exit_process

    exit_process(main())


def _run(args, stdin, stdout, stderr) -> int:
    from irforge.diagnostics import IRForgeError
    from irforge.parser import read_source
    from irforge.registry import registry

    from .driver import write_output

    if args.list_passes:
        stdout.write(list_passes_text())
        return 0
    if args.list_dialects:
        for d in registry().dialects().values():
            level = d.level or "-"
            stdout.write(f"{d.name:10} {level:8} {len(d.ops):3} ops  {d.summary}\n")
        return 0

    from irforge.pipeline import build_pass_manager

    pipeline = args.pass_pipeline
    if args.dump_pass_pipeline and args.input is None:
        stderr.write(build_pass_manager(pipeline).pipeline_text + "\n")
        return 0

    name = args.input if args.input not in (None, "-") else "<stdin>"
    text = stdin.read() if name == "<stdin>" else read_source(args.input)
    if args.run_reproducer:
        pipeline = _reproducer_pipeline(text, name)

    build_pass_manager(pipeline)  # a bad pipeline is one error, before any chunk is processed
    check_pass_names(args)
    chunks = _split(text) if args.split_input_file else [(text, 0)]
    outputs, failed = [], False
    for k, (chunk, offset) in enumerate(chunks):
        try:
            out, ok = _process_chunk(args, pipeline, chunk, offset, name, k, len(chunks), stderr)
        except IRForgeError as e:  # report it and go on with the next chunk, as mlir-opt does
            stderr.write(e.render() + "\n")
            out, ok = None, False
        failed |= not ok
        if out is not None:
            outputs.append(out)
    write_output(args.output, "// -----\n".join(outputs), stdout)
    return 1 if failed else 0


def _process_chunk(args, pipeline, chunk, offset, name, k, n, stderr):
    """Parse, run and print one chunk. Returns (printed IR or None, success)."""
    from irforge import instrumentation as ins
    from irforge.diagnostics import InternalError, IRForgeError
    from irforge.instrumentation import write_reproducer
    from irforge.parser import parse_module
    from irforge.pass_manager import Timer
    from irforge.pipeline import build_pass_manager
    from irforge.printer import print_module

    timer = Timer()
    diags = []
    out = None
    try:
        with timer.phase("parse"):
            module = parse_module(
                chunk,
                name,
                allow_unregistered=args.allow_unregistered_dialect,
                line_offset=offset,
                verify=False,
            )
        with timer.phase("verify"):
            from irforge.verifier import verify

            verify(module)
        pm = build_pass_manager(pipeline, module)
        if args.dump_pass_pipeline:
            stderr.write(pm.pipeline_text + "\n")
        tree_dir = args.print_ir_tree_dir
        if tree_dir and n > 1:
            tree_dir = os.path.join(tree_dir, f"chunk{k}")
        hooks = [] if args.no_verify_each else [ins.VerifyEach(timer)]
        hooks += instrumentations(args, stderr, timer, tree_dir=tree_dir)
        if args.check_numerics or args.bisect_numerics:
            from irforge.testing import NumericsCheck

            hooks.append(NumericsCheck(bisect=args.bisect_numerics))
        pm.instrumentations = hooks
        pm.run(module)
        with timer.phase("print"):
            out = print_module(module, generic=args.generic, debuginfo=args.print_debuginfo)
    except IRForgeError as e:
        if not args.verify_diagnostics:
            raise
        diags = e.diagnostics
    except Exception as e:  # a bug in irforge: the chunk and the pipeline reproduce it
        err = e if isinstance(e, InternalError) else InternalError("in irforge-opt", e)
        if err.reproducer is None:
            err.reproducer = write_reproducer(chunk, pipeline)
        if err is e:
            raise
        raise err from e
    finally:
        if args.timing:
            stderr.write(ins.timing_report(timer))
    if args.verify_diagnostics:
        return out, _check_expected(chunk, offset, name, diags, stderr)
    return out, True


def _check_expected(chunk, offset, name, diags, stderr) -> bool:
    """Match produced diagnostics (and their notes) against `expected-*` annotations; report every mismatch."""
    from irforge.diagnostics import Diagnostic
    from irforge.location import FileLineColLoc

    lines = chunk.splitlines()
    expected = []  # [line, severity, text, matched]
    for i, line in enumerate(lines):
        for m in _EXPECTED.finditer(line):
            sev, where, msg = m.groups()
            at = offset + i + 1
            if where == "above":
                at -= 1
            elif where == "below":
                at += 1
            elif where:
                at += int(where)
            expected.append([at, sev, msg, False])
    produced = []
    for d in diags:
        produced.append(d)
        produced.extend(d.notes)
    ok = True
    for d in produced:
        flc = d.loc.file_line_col()
        hit = next(
            (
                e
                for e in expected
                if not e[3] and e[1] == d.severity and e[2] in d.message and flc is not None and flc.line == e[0]
            ),
            None,
        )
        if hit is None:
            stderr.write(Diagnostic("error", f"unexpected {d.severity}: {d.message}", d.loc).render() + "\n")
            ok = False
        else:
            hit[3] = True
    for at, sev, msg, matched in expected:
        if not matched:
            loc = FileLineColLoc(name, at, 1)
            stderr.write(Diagnostic("error", f'expected {sev} "{msg}" was not produced', loc).render() + "\n")
            ok = False
    return ok


def _split(text: str):
    """Chunks with the number of lines before each, so diagnostics keep the file's line numbers."""
    chunks, start = [], 0
    for m in _SPLIT.finditer(text):
        chunks.append((text[start : m.start()], text.count("\n", 0, start)))
        start = m.end() + 1
    chunks.append((text[start:], text.count("\n", 0, start)))
    return chunks


def _reproducer_pipeline(text: str, name: str) -> str:
    import json

    from irforge.diagnostics import error
    from irforge.instrumentation import REPRODUCER_HEADER
    from irforge.location import FileLineColLoc

    first = text.split("\n", 1)[0]
    if not first.startswith(REPRODUCER_HEADER):
        raise error(
            f"not a reproducer: the first line must start with '{REPRODUCER_HEADER}'", FileLineColLoc(name, 1, 1)
        )
    try:
        pipeline = json.loads(first[len(REPRODUCER_HEADER) :])
    except ValueError:
        pipeline = None
    if not isinstance(pipeline, str):
        loc = FileLineColLoc(name, 1, len(REPRODUCER_HEADER) + 1)
        raise error("reproducer header: the pipeline is not a valid string (a JSON string is expected)", loc)
    return pipeline


def list_passes_text() -> str:
    from irforge.pipeline import option_summary
    from irforge.registry import registry

    out = []
    for name, cls in registry().passes().items():
        out.append(f"{name}  --  {cls.summary()}")
        anchor = "" if cls.anchor == "builtin.module" else f", runs on each '{cls.anchor}'"
        out.append(f"    level: {cls.input_level} -> {cls.leaves_level()}{anchor}")
        for opt in cls.options.values():
            out.append(f"    {option_summary(opt)}" + (f"  -- {opt.help}" if opt.help else ""))
    reg = registry().pipelines()
    if reg:
        out.append("")
        out.append("Named pipelines:")
        for name, p in reg.items():
            doc = next((ln.lstrip("#/ ").strip() for ln in p.text.splitlines() if ln.strip()), "")
            out.append(f"{name}  --  {doc}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    command()
