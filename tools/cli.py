"""irforge: compile PyTorch programs to any level, and run them on a GPU.

    irforge compile -c "nn.RMSNorm(2048)(torch.randn(1,32,2048))" --ir tensor
    irforge compile model.py --ir torch -o model.ir
    irforge compile -c "x=torch.randn(16,64); torch.softmax(x, -1)" --check -vv
    irforge compile model.py --ir tile --after loop-to-tile=my-pass      # a plugin pass in the default lowering
    irforge run model.py                                                  # on a GPU, compared with eager
    irforge run model.cuda.ir --model model.py                            # a cuda-level file, the model's weights

Each subcommand is a `Command`: its `add_arguments(parser)` and `run(args, out, err)`; registering one in `COMMANDS`
is all a new subcommand (`run`, `bench`, `tune`) needs. `main(argv, stdout=, stderr=)` is the in-process API the
tests use. Nothing heavy (torch) is imported before the arguments are parsed, so `--help` is instant.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from . import new_plugin
from .driver import exit_process, write_output
from .flags import (
    ArgumentParser,
    add_instrumentation_arguments,
    add_model_arguments,
    add_tuning_arguments,
    check_pass_names,
    instrumentations,
    tuning_db,
)


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    add_arguments: Callable
    run: Callable  # (args, stdout, stderr) -> exit code


# ---- compile ---------------------------------------------------------------------------------------------------
def _source_arguments(p: argparse.ArgumentParser, file_help: str) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("file", nargs="?", help=file_help)
    src.add_argument("-c", dest="snippet", metavar="EXPR", help="a Python snippet whose last expression is the program")


def _pipeline_arguments(p: argparse.ArgumentParser) -> None:
    add_tuning_arguments(p)
    p.add_argument(
        "--pass-pipeline",
        default=None,
        metavar="PIPE",
        help="run PIPE on the captured torch IR instead of the default lowering (plugin passes included)",
    )
    for where in ("after", "before"):
        p.add_argument(
            f"--{where}",
            action="append",
            default=[],
            metavar="POINT=PIPE",
            help=f"run PIPE {where} each place the default lowering runs POINT (a pass or a named pipeline, e.g. "
            "loop-to-tile=my-pass)",
        )


def _compile_arguments(p: argparse.ArgumentParser) -> None:
    from irforge.dialect import LEVELS

    _source_arguments(
        p,
        "a Python file defining `model` and `example_inputs`; or a MODEL: a built-in (tinyllama-1.1b, qwen2.5-7b,"
        " smollm2-135m), an HF model directory or config.json",
    )
    p.add_argument("--ir", default=None, choices=LEVELS, help="the level to stop at and print (default: tensor)")
    _pipeline_arguments(p)
    p.add_argument("-o", dest="output", default="-", metavar="FILE", help="write the IR to FILE (default: stdout)")
    p.add_argument(
        "-v",
        dest="verbose",
        action="count",
        default=0,
        help="-v: each pass as it runs and its remarks (what it decided, why); -vv: its diff too",
    )
    p.add_argument("--check", action="store_true", help="run the level's reference interpreter, compare with eager")
    p.add_argument(
        "--bisect-numerics",
        action="store_true",
        help="after every pass, run the IR's reference interpreter on the program's inputs and name the first pass "
        "whose answer differs from eager",
    )
    p.add_argument("--print-debuginfo", action="store_true", help="print each op's location")
    p.add_argument("--generic", action="store_true", help="print every op in the generic form")
    add_instrumentation_arguments(p)
    g = add_model_arguments(p, "models (when compiling a MODEL: its prefill and decode step)")
    g.add_argument("--save", metavar="FILE", help="also write the compiled model (for irforge generate --compiled)")


def _program(args):
    """The PyTorch program the command names (a file or a snippet); IR files are irforge-opt's."""
    from irforge import frontend
    from irforge.diagnostics import error

    if args.snippet is not None:
        return frontend.from_snippet(args.snippet)
    if args.file.endswith((".ir", ".mlir")):
        raise error(
            f"irforge {args.command} takes a PyTorch program (a .py file or -c); for textual IR use irforge-opt: "
            f"irforge-opt {args.file} --pass-pipeline=PIPE"
        )
    return frontend.from_file(args.file)


def _lowering_options(args, level: str) -> dict:
    """`compile_program`'s keyword arguments for the pipeline flags."""
    from irforge.diagnostics import error

    points = {}
    for where in ("after", "before"):
        found: dict[str, str] = {}
        for item in getattr(args, where):
            point, eq, pipe = item.partition("=")
            if not eq or not point or not pipe:
                raise error(f"--{where} {item}: expected POINT=PIPE, e.g. --{where} loop-to-tile=my-pass")
            found[point] = f"{found[point]},{pipe}" if point in found else pipe
        points[where] = found
    if args.pass_pipeline is not None and (points["after"] or points["before"]):
        raise error("--after and --before insert into the default lowering; --pass-pipeline replaces it: use one")
    return {"ir": level, "pipeline": args.pass_pipeline, "tuning": tuning_db(args), **points}


def _hooks(args, err, timer) -> list:
    from irforge import instrumentation

    check_pass_names(args)
    hooks = []
    if args.verbose == 1:
        hooks.append(instrumentation.PrintPassNames(stream=err))
    elif args.verbose >= 2:
        hooks.append(instrumentation.PrintIRDiff(stream=err))
    if args.verbose:
        hooks.append(instrumentation.Remarks(stream=err))
    return hooks + instrumentations(args, err, timer)


def _is_model(args) -> bool:
    from irforge.tune.command import names_a_model

    return names_a_model(args.file)


def _compile_model_run(args, out, err) -> int:
    from irforge.diagnostics import error
    from irforge.models import compile_model, describe, save_compiled
    from irforge.pass_manager import Timer

    if args.check or args.pass_pipeline is not None or args.after or args.before:
        raise error("a MODEL compiles with the default lowering; --check and the pipeline flags are for programs")
    model = compile_model(
        args.file,
        dtype=args.dtype,
        batch=args.batch,
        prompt_len=args.prompt_len,
        max_len=args.max_len,
        level=args.ir or "tensor",
        instrumentations=_hooks(args, err, Timer()),
        tuning=tuning_db(args),
    )
    if args.save:
        save_compiled(model, args.save)
    text = describe(model, generic=args.generic, debuginfo=args.print_debuginfo)
    if args.output == "-":
        out.write(text)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    err.write(model.summary() + "\n")
    return 0


_MODEL_FLAGS = [  # (flag, attribute, default) of the model group
    ("--dtype", "dtype", "f32"),
    ("--batch", "batch", 1),
    ("--prompt-len", "prompt_len", 32),
    ("--max-len", "max_len", None),
    ("--save", "save", None),
]


def _compile_run(args, out, err) -> int:
    from irforge.compiler import compile_program
    from irforge.diagnostics import error
    from irforge.instrumentation import timing_report
    from irforge.pass_manager import Timer
    from irforge.printer import print_module

    if _is_model(args):
        return _compile_model_run(args, out, err)
    given = [f for f, v, d in _MODEL_FLAGS if getattr(args, v) != d]
    if given:
        raise error(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for compiling a MODEL, not a program")
    if args.ir is not None and args.pass_pipeline is not None:
        raise error("--ir stops the default lowering at a level; --pass-pipeline replaces it: use one")
    options = _lowering_options(args, args.ir or "tensor")
    timer = Timer()
    tp = _program(args)
    try:
        prog = compile_program(tp, instrumentations=_hooks(args, err, timer), bisect=args.bisect_numerics, **options)
    finally:
        if args.timing:
            err.write(timing_report(timer))
    if args.check and prog.level == "cuda":
        raise error("--check runs the level's reference interpreter, and the cuda level has none: use `irforge run`")
    text = print_module(prog.module, generic=args.generic, debuginfo=args.print_debuginfo)
    write_output(args.output, text, out)
    if not args.check:
        return 0
    from irforge.testing import output_types

    ok = True
    types = output_types(prog.module)
    for i, (c, t) in enumerate(zip(prog.check(), types)):
        err.write(f"check: output #{i} ({t}) vs PyTorch eager: {c}\n")
        ok &= c.ok
    if not ok:
        err.write(f"check: the {prog.level} level's reference interpreter does not match PyTorch eager\n")
    return 0 if ok else 1


# ---- run -------------------------------------------------------------------------------------------------------
def _run_arguments(p: argparse.ArgumentParser) -> None:
    _source_arguments(p, "a Python file defining `model` and `example_inputs`, or a cuda-level .ir file")
    _pipeline_arguments(p)
    p.add_argument(
        "--model",
        default=None,
        metavar="FILE",
        help="with a .ir file: the Python file it was compiled from (its weights and inputs; compared with eager)",
    )
    p.add_argument("--bench", action="store_true", help="also time irforge, eager and torch.compile (one table)")
    p.add_argument("--reps", type=int, default=100, help="timed runs per system with --bench (median; default 100)")
    p.add_argument("-v", dest="verbose", action="count", default=0, help="-v: each pass as it runs and its remarks")


def _run_run(args, out, err) -> int:
    from irforge.diagnostics import error
    from irforge.runtime import has_gpu

    ir_file = args.file is not None and args.file.endswith(".ir")
    if ir_file:
        from irforge.runner import load_cuda_program

        prog = load_cuda_program(args.file, args.model)  # a wrong level is an error with or without a GPU
        if args.bench or args.pass_pipeline is not None or args.after or args.before:
            raise error("a .ir file runs as it is: --bench and the pipeline flags are for Python programs")
    elif args.model is not None:
        raise error("--model names the Python file a .ir file was compiled from; give the .ir file too")
    if not has_gpu():
        err.write("irforge run: no CUDA GPU is visible here (irforge.runtime.has_gpu() is false)\n")
        return 1
    from irforge import instrumentation
    from irforge.compiler import compile_program
    from irforge.runner import bench_case, check_on_gpu, run_on_gpu

    if ir_file and not prog.expected:
        for i, o in enumerate(run_on_gpu(prog)):
            out.write(f"output #{i}: {list(o.shape)} mean {o.mean():.6g}, max |x| {abs(o).max():.6g} ")
            out.write("(random inputs and weights; --model FILE compares with PyTorch eager)\n")
        return 0
    if not ir_file:
        tp = _program(args)
        hooks = (
            [instrumentation.PrintPassNames(stream=err), instrumentation.Remarks(stream=err)] if args.verbose else []
        )
        prog = compile_program(tp, instrumentations=hooks, **_lowering_options(args, "cuda"))
        if prog.level != "cuda":
            raise error(f"the pipeline leaves the program at the {prog.level} level; irforge run needs cuda")
    ok = True
    for i, (_, c) in enumerate(check_on_gpu(prog)):
        out.write(f"output #{i}: max abs error {c.max_abs:.3g}, max rel error {c.max_rel:.3g} vs PyTorch eager ")
        out.write(f"(tolerance {c.tol:.3g}): {'ok' if c.ok else 'MISMATCH'}{f' ({c.note})' if c.note else ''}\n")
        ok &= c.ok
    if not ok:
        err.write("irforge run: the GPU results do not match PyTorch eager\n")
        return 1
    if args.bench:
        from irforge.bench.command import bench_one

        case, system = bench_case(tp, prog, args.snippet or args.file)
        bench_one(case, system, args.reps, out, err)
    return 0


# ---- bench -----------------------------------------------------------------------------------------------------
def _bench_arguments(p: argparse.ArgumentParser) -> None:
    from irforge.bench.command import add_arguments

    add_arguments(p)


def _bench_run(args, out, err) -> int:
    from irforge.bench.command import run

    return run(args, out, err)


# ---- generate ----------------------------------------------------------------------------------------------------
def _generate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "model", help="a built-in (tinyllama-1.1b, qwen2.5-7b, smollm2-135m), an HF model dir or config.json"
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="the prompt, as text (needs the model directory's tokenizer.json)")
    src.add_argument("--ids", help="the prompt as token ids: 1,2,3")
    p.add_argument("-n", dest="tokens", type=int, default=32, help="tokens to generate per sequence (default: 32)")
    p.add_argument("--batch", type=int, default=None, help="sequences, each the prompt (default: 1)")
    p.add_argument("--dtype", default=None, choices=["f32", "bf16", "f16"], help="compute dtype (default: f32)")
    p.add_argument(
        "--weights",
        help="a safetensors directory or a .gguf file (default: the model directory's safetensors, else random)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of random weights (default: 0)")
    add_tuning_arguments(p)
    p.add_argument(
        "--compiled",
        metavar="FILE",
        help="run the model `irforge compile MODEL --ir cuda --save FILE` wrote (compiled for this prompt's length)",
    )
    p.add_argument(
        "--interpret",
        action="store_true",
        help="run the loop level on the CPU's reference interpreters instead of the GPU (slow: small models; "
        "no timings)",
    )
    p.add_argument("--no-compare", action="store_true", help="skip HF: its greedy tokens and its timings")
    p.add_argument("--no-torch-compile", action="store_true", help="time HF eager but not torch.compile")
    p.add_argument("--json", metavar="FILE", help="also write the tokens, HF's, the timings and the limit as JSON")


def _generate_run(args, out, err) -> int:
    from irforge.runtime import has_gpu

    if not args.interpret and not has_gpu():
        err.write(
            "irforge generate: no CUDA GPU is visible here (irforge.runtime.has_gpu() is false); "
            "--interpret runs on the CPU\n"
        )
        return 1
    from irforge.diagnostics import error
    from irforge.models.cli import generate

    if args.compiled and (args.db or args.untuned):
        raise error("--db and --untuned choose the schedules of a compile; --compiled runs one already compiled")
    args.tuning = tuning_db(args)
    return generate(args, out, err)


# ---- tune ------------------------------------------------------------------------------------------------------
def _tune_arguments(p: argparse.ArgumentParser) -> None:
    from irforge.tune.command import add_arguments

    add_arguments(p)
    g = add_model_arguments(p, "models (when tuning a MODEL: the kernels of its prefill and decode step)")
    g.add_argument("--step", choices=["prefill", "decode"], help="only this step's kernels (default: both)")


def _tune_run(args, out, err) -> int:
    from irforge.tune.command import run

    return run(args, out, err)


COMMANDS = {
    c.name: c
    for c in [
        Command("compile", "capture a PyTorch program and print its IR at a level", _compile_arguments, _compile_run),
        Command(
            "run", "compile a PyTorch program to CUDA, run it on the GPU, compare with eager", _run_arguments, _run_run
        ),
        Command(
            "bench",
            "run a benchmark suite (seed84, llm): irforge vs eager vs torch.compile",
            _bench_arguments,
            _bench_run,
        ),
        Command(
            "generate",
            "greedy decoding with a compiled model on the GPU: HF's greedy tokens, and speed beside HF's",
            _generate_arguments,
            _generate_run,
        ),
        Command(
            "new-plugin",
            "write a plugin with one pass, its lit test and its numeric test (they pass as written)",
            new_plugin.add_arguments,
            new_plugin.run,
        ),
        Command(
            "tune",
            "search each kernel's schedule (the tile passes' options) on the GPU; compile replays the winners",
            _tune_arguments,
            _tune_run,
        ),
    ]
}


def _arg_parser() -> argparse.ArgumentParser:
    ap = ArgumentParser(
        prog="irforge",
        description="irforge: a hackable ML compiler from PyTorch to CUDA through six textual IR levels.",
    )
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for c in COMMANDS.values():
        p = sub.add_parser(c.name, help=c.help, description=c.help)
        c.add_arguments(p)
    return ap


def main(argv=None, *, stdout=None, stderr=None) -> int:
    from .driver import guarded

    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _arg_parser().parse_args(argv)
    return guarded("irforge", argv, lambda: COMMANDS[args.command].run(args, stdout, stderr), stderr)


def command() -> NoReturn:
    """The `irforge` executable (`main` is the in-process API)."""
    exit_process(main())


if __name__ == "__main__":
    command()
