"""irforge's own compile time for one HF decoder layer (TinyLlama-1.1B's config), per pass and in total.

    python bench/compile_latency.py [--dtype f32 bf16] [--tokens 128] [--repeat 2] [--processes 3] [--json FILE]

torch's import, `torch.export` and its decompositions are left out: the script exports once, then times what
irforge does from there: translating the exported graph into the torch dialect, every pass of the default lowering
to the cuda level (the verifier after each, reported apart) and printing the cuda-level program with its CUDA C++.
NVRTC is not run (the lowering emits the source; compiling it is the runtime's job).

Numbers are CPU time (user + system), which a busy machine inflates less than wall time but still inflates (shared
caches and cores), so the best of several runs is kept: `first` is the first compile in a fresh process (it imports
irforge's passes and dialects, as one `irforge compile` does), the best of `--processes` processes per dtype;
`warm` the best of `--repeat` more compiles in the same processes. `--tokens 512` is the llm suite's D3 shape.
`--profile PREFIX` writes a cProfile of one more compile per dtype (`python -m pstats FILE`). The sha256 of the
printed program tells whether a change to irforge changed its output.
"""

from __future__ import annotations

import argparse
import compileall
import cProfile
import gc
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

from irforge.pass_manager import Instrumentation
from irforge.verifier import verify_or_raise

REPO = Path(__file__).resolve().parent.parent
DTYPES = {"f32": "float32", "bf16": "bfloat16"}


def exported_layer(dtype: str, tokens: int):
    """The exported program of a TinyLlama decoder layer on a causal prefill of `tokens` tokens, and its inputs'
    names (random weights: only the graph matters)."""
    import torch
    from irforge.dialects.torch.capture import export

    from irforge.bench.models import TINYLLAMA, decoder_layer, rope_tables

    torch.manual_seed(0)
    dt = getattr(torch, DTYPES[dtype])
    cos, sin = rope_tables(TINYLLAMA, torch.arange(tokens)[None], dt)
    layer = decoder_layer(TINYLLAMA).to(dt).eval()
    hidden = torch.randn(1, tokens, TINYLLAMA.hidden, dtype=dt)
    return export(layer, (hidden, cos, sin)), ["hidden", "cos", "sin"]


def compile_once(ep, names: list[str], timer) -> tuple[str, dict[str, float]]:
    """Translate, lower to cuda and print; the cuda-level text and {phase: CPU seconds}, passes in `timer`."""
    from irforge.dialects.torch.capture import Translator

    from irforge.compiler import lowering
    from irforge.pass_manager import PassManager, frozen_heap
    from irforge.printer import print_module

    cpu = {}
    gc_before = _gc.seconds
    t0 = time.process_time()
    with frozen_heap():  # as `capture` translates
        module = Translator(ep, names).run("forward").module
    t1 = time.process_time()
    schedule = lowering("cuda")
    PassManager(schedule, [CpuTiming(timer)]).run(module)
    t2 = time.process_time()
    text = print_module(module)
    t3 = time.process_time()
    cpu["translate"], cpu["lower"], cpu["print"] = t1 - t0, t2 - t1, t3 - t2
    cpu["total"], cpu["gc"] = t3 - t0, _gc.seconds - gc_before
    return text, cpu


class _GcClock:
    """CPU time the cyclic garbage collector takes (its passes are spread over whatever allocates)."""

    def __init__(self):
        self.seconds = 0.0
        gc.callbacks.append(self)

    def __call__(self, phase, info):
        if phase == "start":
            self._t0 = time.process_time()
        else:
            self.seconds += time.process_time() - self._t0


_gc = _GcClock()


class CpuTiming(Instrumentation):
    """`--timing`'s per-pass table in CPU time, with the verifier after each pass (as `irforge compile` runs it)
    timed apart."""

    def __init__(self, timer):
        self.timer = timer

    def before_pass(self, p, module):
        self._t0 = time.process_time()

    def after_pass(self, p, module):
        t1 = time.process_time()
        self.timer.add(f"pass {p.name}", t1 - self._t0)
        verify_or_raise(module, f"after pass '{p.name}'")
        self.timer.add("verify", time.process_time() - t1)


def measure(dtype: str, tokens: int, repeat: int, profile: str | None) -> dict:
    """The first compile in this process (irforge's modules still to import, its caches empty: what one
    `irforge compile` pays) and the best of `repeat` more."""
    from irforge.pass_manager import Timer

    ep, names = exported_layer(dtype, tokens)
    runs = []
    for _ in range(1 + repeat):
        timer = Timer()
        text, cpu = compile_once(ep, names, timer)
        runs.append((cpu, timer.totals))
    if profile:
        cProfile.runctx("compile_once(ep, names, Timer())", globals(), locals(), profile)

    def row(cpu, totals):
        passes = sorted(
            ((k.removeprefix("pass "), v) for k, v in totals.items() if k != "verify"), key=lambda kv: -kv[1]
        )
        return {**cpu, "verify": totals.get("verify", 0.0), "passes": dict(passes)}

    warm = min(runs[1:], key=lambda r: r[0]["total"]) if repeat else runs[0]
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return {"first": row(*runs[0]), "warm": row(*warm), "cuda_lines": text.count("\n"), "sha256": digest}


def report(dtype: str, tokens: int, r: dict, top: int) -> str:
    lines = [f"== {dtype}, {tokens} tokens: {r['cuda_lines']} lines of cuda IR, sha256 {r['sha256']}"]
    for kind in ("first", "warm"):
        c = r[kind]
        lines.append(
            f"   {kind:5}  total {c['total']:.3f} s CPU = translate {c['translate']:.3f} + lower {c['lower']:.3f} "
            f"(of which verify {c['verify']:.3f}) + print {c['print']:.3f}; garbage collection {c['gc']:.3f}"
        )
    lines += [f"   {secs * 1e3:8.1f} ms  {name}" for name, secs in list(r["first"]["passes"].items())[:top]]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", nargs="+", default=["f32", "bf16"], choices=list(DTYPES))
    ap.add_argument("--tokens", type=int, default=128, help="prefill length (512 is the D3 case)")
    ap.add_argument("--repeat", type=int, default=2, help="compiles after the first, for the warm number")
    ap.add_argument("--processes", type=int, default=1, help="fresh processes per dtype; the best first compile")
    ap.add_argument("--top", type=int, default=15, help="passes of the first compile to list, slowest first")
    ap.add_argument("--profile", metavar="PREFIX", help="cProfile one more compile per dtype into PREFIX.DTYPE.prof")
    ap.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # one dtype, JSON on stdout
    args = ap.parse_args(argv)

    if args.worker:
        # As an installed irforge is: byte-compiled (a no-op when it is; PYTHONDONTWRITEBYTECODE would otherwise
        # have the first compile byte-compile every module it imports).
        for d in ("irforge", "dialects", "passes", "tools"):
            compileall.compile_dir(REPO / d, quiet=1)
        prof = f"{args.profile}.{args.dtype[0]}.prof" if args.profile else None
        json.dump(measure(args.dtype[0], args.tokens, args.repeat, prof), sys.stdout)
        return 0
    results = {}
    for dtype in args.dtype:  # a process each, so that each first compile starts cold
        cmd = [sys.executable, __file__, "--worker", "--dtype", dtype, "--tokens", str(args.tokens)]
        cmd += ["--repeat", str(args.repeat)] + (["--profile", args.profile] if args.profile else [])
        runs = [json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)]
        runs += [json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
                 for _ in range(args.processes - 1)]  # fmt: skip
        assert len({r["sha256"] for r in runs}) == 1, "one program, compiled twice, printed differently"
        results[dtype] = {
            **runs[0],
            "first": min((r["first"] for r in runs), key=lambda c: c["total"]),
            "warm": min((r["warm"] for r in runs), key=lambda c: c["total"]),
        }
        print(report(dtype, args.tokens, results[dtype], args.top), flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"tokens": args.tokens, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
