"""irforge: compile PyTorch programs (and, as later levels land, run, benchmark and tune them).

    irforge compile -c "nn.RMSNorm(2048)(torch.randn(1,32,2048))" --ir tensor
    irforge compile model.py --ir torch -o model.ir
    irforge compile -c "x=torch.randn(16,64); torch.softmax(x, -1)" --check -vv

Each subcommand is a `Command`: its `add_arguments(parser)` and `run(args, out, err)`; registering one in `COMMANDS`
is all a new subcommand (`run`, `bench`, `tune`) needs. `main(argv, stdout=, stderr=)` is the in-process API the
tests use. Nothing heavy (torch) is imported before the arguments are parsed, so `--help` is instant.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    add_arguments: Callable
    run: Callable  # (args, stdout, stderr) -> exit code


# ---- compile ---------------------------------------------------------------------------------------------------
def _compile_arguments(p: argparse.ArgumentParser) -> None:
    from irforge.compiler import levels

    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "file",
        nargs="?",
        help="a Python file defining `model` and `example_inputs`; or a MODEL: a built-in (tinyllama-1.1b,"
        " qwen2.5-7b, smollm2-135m), an HF model directory or config.json",
    )
    src.add_argument("-c", dest="snippet", metavar="EXPR", help="a Python snippet whose last expression is the program")
    p.add_argument("--ir", default="tensor", choices=levels(), help="the level to stop at and print (default: tensor)")
    p.add_argument("-o", dest="output", default="-", metavar="FILE", help="write the IR to FILE (default: stdout)")
    p.add_argument("-v", dest="verbose", action="count", default=0, help="-v: each pass as it runs; -vv: its diff")
    p.add_argument("--check", action="store_true", help="run the level's reference interpreter, compare with eager")
    p.add_argument("--print-debuginfo", action="store_true", help="print each op's location")
    p.add_argument("--generic", action="store_true", help="print every op in the generic form")
    _model_arguments(p.add_argument_group("models (when compiling a MODEL)"))


def _model_arguments(g) -> None:
    g.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"], help="compute dtype (default: f32)")
    g.add_argument("--batch", type=int, default=1, help="sequences per batch (default: 1)")
    g.add_argument("--prompt-len", type=int, default=32, help="tokens of the prefill (default: 32)")
    g.add_argument("--max-len", type=int, default=None, help="tokens the KV cache holds (default: 2x the prompt)")


def _is_model(args) -> bool:
    from irforge.models.configs import BUILTIN

    f = getattr(args, "file", None)
    return f is not None and (f in BUILTIN or os.path.isdir(f) or f.endswith(".json"))


def _hooks(verbose: int, err) -> list:
    from irforge import instrumentation

    if verbose == 1:
        return [instrumentation.PrintPassNames(stream=err)]
    if verbose >= 2:
        return [instrumentation.PrintIRDiff(stream=err)]
    return []


def _compile_model_run(args, out, err) -> int:
    from irforge.diagnostics import error
    from irforge.models import compile_model, describe

    if args.check:
        raise error("--check on a MODEL: the model tests compare the loop level with HF (tests/test_models.py)")
    model = compile_model(
        args.file,
        dtype=args.dtype,
        batch=args.batch,
        prompt_len=args.prompt_len,
        max_len=args.max_len,
        level=args.ir,
        instrumentations=_hooks(args.verbose, err),
    )
    text = describe(model, generic=args.generic, debuginfo=args.print_debuginfo)
    if args.output == "-":
        out.write(text)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    err.write(model.summary() + "\n")
    return 0


def _compile_run(args, out, err) -> int:
    from irforge import frontend
    from irforge.compiler import compile_program
    from irforge.printer import print_module

    if _is_model(args):
        return _compile_model_run(args, out, err)
    tp = frontend.from_snippet(args.snippet) if args.snippet is not None else frontend.from_file(args.file)
    hooks = _hooks(args.verbose, err)
    if args.check and args.ir == "cuda":
        from irforge.diagnostics import error

        raise error("--check runs the level's reference interpreter, and the cuda level has none: use `irforge run`")
    prog = compile_program(tp, args.ir, hooks)
    text = print_module(prog.module, generic=args.generic, debuginfo=args.print_debuginfo)
    if args.output == "-":
        out.write(text)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    if not args.check:
        return 0
    from irforge.testing import output_types

    ok = True
    types = output_types(prog.module)
    for i, (c, t) in enumerate(zip(prog.check(), types)):
        err.write(f"check: output #{i} ({t}) vs PyTorch eager: {c}\n")
        ok &= c.ok
    if not ok:
        err.write(f"check: the {args.ir} level's reference interpreter does not match PyTorch eager\n")
    return 0 if ok else 1


# ---- run -------------------------------------------------------------------------------------------------------
def _run_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("file", nargs="?", help="a Python file defining `model` and `example_inputs`")
    src.add_argument("-c", dest="snippet", metavar="EXPR", help="a Python snippet whose last expression is the program")
    p.add_argument("--bench", action="store_true", help="also time irforge, eager and torch.compile (one table)")
    p.add_argument("--reps", type=int, default=100, help="timed runs per system with --bench (median; default 100)")
    p.add_argument("-v", dest="verbose", action="count", default=0, help="-v: each pass as it runs")


def _run_run(args, out, err) -> int:
    from irforge.runtime import has_gpu

    if not has_gpu():
        err.write("irforge run: no CUDA GPU is visible here (irforge.runtime.has_gpu() is false)\n")
        return 1
    from irforge import frontend, instrumentation
    from irforge.compiler import compile_program
    from irforge.runner import bench_setup, check_on_gpu, harness_module

    tp = frontend.from_snippet(args.snippet) if args.snippet is not None else frontend.from_file(args.file)
    hooks = [instrumentation.PrintPassNames(stream=err)] if args.verbose else []
    prog = compile_program(tp, "cuda", hooks)
    ok = True
    for i, (_, c) in enumerate(check_on_gpu(prog)):
        out.write(f"output #{i}: max abs error {c.max_abs:.3g}, max rel error {c.max_rel:.3g} vs PyTorch eager ")
        out.write(f"(tolerance {c.tol:.3g}): {'ok' if c.ok else 'MISMATCH'}{f' ({c.note})' if c.note else ''}\n")
        ok &= c.ok
    if not ok:
        err.write("irforge run: the GPU results do not match PyTorch eager\n")
        return 1
    if args.bench:
        harness = harness_module()
        case, system = bench_setup(tp, prog, args.snippet or args.file)
        if args.reps < 100:
            os.environ["IRFORGE_BENCH_QUICK"] = "1"  # the method asks for >= 100; fewer only when asked for
        systems = [harness.eager(), harness.torch_compile(), system]
        report = harness.run_suite([case], systems, reps=args.reps, log=lambda s: err.write(s + "\n"))
        out.write(harness.markdown(report))
    return 0


# ---- generate ----------------------------------------------------------------------------------------------------
def _generate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "model", help="a built-in (tinyllama-1.1b, qwen2.5-7b, smollm2-135m), an HF model dir or config.json"
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="the prompt, as text (needs the model directory's tokenizer.json)")
    src.add_argument("--ids", help="the prompt as token ids: 1,2,3")
    p.add_argument("-n", dest="tokens", type=int, default=32, help="tokens to generate per sequence (default: 32)")
    p.add_argument("--batch", type=int, default=1, help="sequences, each the prompt (default: 1)")
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"], help="compute dtype (default: f32)")
    p.add_argument(
        "--weights",
        help="a safetensors directory or a .gguf file (default: the model directory's "
        "safetensors, else random weights)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of random weights (default: 0)")
    p.add_argument("--no-compare", action="store_true", help="skip HF eager and torch.compile")


def _generate_run(args, out, err) -> int:
    from irforge.runtime import has_gpu

    if not has_gpu():
        err.write("irforge generate: no CUDA GPU is visible here (irforge.runtime.has_gpu() is false)\n")
        return 1
    from irforge.models.cli import generate

    return generate(args, out, err)


COMMANDS = {
    c.name: c
    for c in [
        Command("compile", "capture a PyTorch program and print its IR at a level", _compile_arguments, _compile_run),
        Command(
            "run", "compile a PyTorch program to CUDA, run it on the GPU, compare with eager", _run_arguments, _run_run
        ),
        Command(
            "generate",
            "greedy decoding with a compiled model on the GPU, beside HF eager and torch.compile",
            _generate_arguments,
            _generate_run,
        ),
    ]
}


def _arg_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="irforge",
        description="irforge: a hackable ML compiler from PyTorch to CUDA through six textual IR levels.",
    )
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for c in COMMANDS.values():
        p = sub.add_parser(c.name, help=c.help, description=c.help)
        c.add_arguments(p)
    return ap


def main(argv=None, *, stdout=None, stderr=None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    args = _arg_parser().parse_args(argv)

    from irforge.diagnostics import IRForgeError

    try:
        return COMMANDS[args.command].run(args, stdout, stderr)
    except IRForgeError as e:
        stderr.write(e.render() + "\n")
        return 1
    except OSError as e:
        stderr.write(f"irforge: error: {e.strerror}: {e.filename}\n")
        return 1
    except Exception as e:  # a bug in irforge, not the user's mistake: say so, keep the traceback on request
        if os.environ.get("IRFORGE_TRACEBACK"):
            raise
        stderr.write(f"irforge: internal error: {type(e).__name__}: {e} (set IRFORGE_TRACEBACK=1 for the traceback)\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
