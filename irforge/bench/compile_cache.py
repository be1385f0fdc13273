"""irforge as a bench system, with compilation separable from measurement.

`irforge bench --compile-only --cache DIR` runs on any machine (no GPU: capture, every pass and NVRTC to CUBIN
for the target arch): per case and pipeline it writes the cuda-level program text (it parses back), the captured
constants the program reads (weights are not stored: the GPU run makes them from the case's seed) and, through
the runtime's content-addressed NVRTC cache pointed at DIR, the CUBINs. A case that fails to compile is stored as
failed, with its error. `irforge bench --cache DIR` on the GPU then loads each matching entry instead of compiling
(a failed one is an error row at once). An entry matches when its key does: the case id, its inputs' names,
shapes and dtypes, the pipeline, the target arch, a hash of the compiler's source tree and, for a pipeline that
replays tuned schedules (`apply-tuning`), a digest of the winners it reads.

    DIR/programs/<case id>/<pipeline digest>.json    key, status, error, compile seconds
    DIR/programs/<case id>/<pipeline digest>.ir      the cuda-level program
    DIR/programs/<case id>/<pipeline digest>.npz     captured constants (when the program reads any)
    DIR/cubin/<hash>.cubin                           the NVRTC cache
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from irforge.diagnostics import IRForgeError, error

from .case import DTYPE_NAMES, Case
from .harness import CaseError, System, executor_fn, first_line

_PACKAGES = ("irforge", "irforge.dialects", "irforge.passes", "irforge.pipelines")
_SOURCES = (".py", ".lark", ".pipeline", ".cuh")
# The bench's measurement and reporting code: changing how results are timed or printed keeps compiled programs.
_NOT_COMPILER = {"bench/harness.py", "bench/report.py", "bench/chart.py", "bench/command.py"}


@functools.cache
def source_hash() -> str:
    """sha256 of the compiler's source tree (every dialect, pass, pipeline and grammar, the suites' cases)."""
    h = hashlib.sha256()
    for pkg in _PACKAGES:
        root = Path(importlib.import_module(pkg).__path__[0])
        for path in sorted(p for p in root.rglob("*") if p.suffix in _SOURCES and "__pycache__" not in p.parts):
            rel = path.relative_to(root).as_posix()
            if pkg == "irforge" and rel in _NOT_COMPILER:
                continue
            h.update(f"{pkg}/{rel}\0".encode() + path.read_bytes() + b"\1")
    return h.hexdigest()


@dataclass
class Compiled:
    """A case lowered to the cuda level, or why it could not be."""

    text: str | None = None  # the cuda-level program
    constants: dict[str, np.ndarray] = field(default_factory=dict)  # params that are not the module's weights
    error: str | None = None
    trace: str | None = None  # where an internal error (not a refusal with a message) came from
    seconds: float = 0.0
    kernels: int = 0


def compile_case(case: Case, pipeline: str, arch: str) -> Compiled:
    """Capture the case on the CPU (weights uninitialised: values do not matter to the compiler), lower it with
    `pipeline`, and compile every kernel with NVRTC for `arch`."""
    from irforge.compiler import params_in_use
    from irforge.dialects.cuda import ops as C
    from irforge.dialects.torch.capture import capture
    from irforge.pass_manager import run_pipeline
    from irforge.pipeline import module_level
    from irforge.printer import print_module
    from irforge.runtime.nvrtc import compile_cuda

    t0 = time.perf_counter()
    try:
        program = case.program("cpu", init=False)
        captured = capture(program, case.empty_inputs("cpu"), [i.name for i in case.inputs])
        run_pipeline(captured.module, pipeline)
        level = module_level(captured.module)
        if level != "cuda":
            raise error(f"the pipeline '{pipeline}' stops at the {level} level; the GPU runs cuda-level programs")
        kernels = [op for op in captured.module.body.ops if isinstance(op, C.CudaKernelOp)]
        for k in kernels:
            compile_cuda(k.attributes["source"], k.attributes["sym_name"], arch=arch)
        weights = {n for n, _ in [*program.named_parameters(), *program.named_buffers()]}
        constants = {k: v for k, v in params_in_use(captured.module, captured.params).items() if k not in weights}
        text = print_module(captured.module)
    except Exception as e:  # a case the compiler cannot take is a result (an error row), not the end of the run
        trace = None if isinstance(e, IRForgeError) else traceback.format_exc(limit=-6)
        return Compiled(error=first_line(e), trace=trace, seconds=time.perf_counter() - t0)
    return Compiled(text, constants, seconds=time.perf_counter() - t0, kernels=len(kernels))


class CompileCache:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.hits = 0
        self.misses: list[str] = []

    def use_for_cubins(self) -> None:
        """Point the runtime's NVRTC cache at this directory (the CUBINs travel with the programs)."""
        os.environ["IRFORGE_CACHE_DIR"] = str(self.root)

    @staticmethod
    def key(case: Case, pipeline: str, arch: str) -> dict:
        from irforge.tune.db import pipeline_tuning

        return {
            "case": case.id,
            "inputs": [[i.name, list(i.shape), DTYPE_NAMES[i.dtype]] for i in case.inputs],
            "pipeline": pipeline,
            "arch": arch,
            "source": source_hash(),
            "tuning": pipeline_tuning(pipeline),  # the winners a tuned pipeline replays
        }

    def _base(self, case: Case, pipeline: str) -> Path:
        digest = hashlib.sha256(pipeline.encode()).hexdigest()[:12]
        return self.root / "programs" / case.id / digest

    def store(self, case: Case, pipeline: str, arch: str, c: Compiled) -> None:
        base = self._base(case, pipeline)
        base.parent.mkdir(parents=True, exist_ok=True)
        if c.text is not None:
            base.with_suffix(".ir").write_text(c.text)
        if c.constants:
            np.savez_compressed(base.with_suffix(".npz"), **c.constants)
        entry = {
            "key": self.key(case, pipeline, arch),
            "status": "error" if c.error else "ok",
            "error": c.error,
            "traceback": c.trace,
            "compile_seconds": round(c.seconds, 3),
            "kernels": c.kernels,
        }
        base.with_suffix(".json").write_text(json.dumps(entry, indent=1) + "\n")

    def load(self, case: Case, pipeline: str, arch: str) -> Compiled | None:
        """The stored result for this key, or None (a miss: nothing stored, or stored under another key)."""
        base = self._base(case, pipeline)
        try:
            entry = json.loads(base.with_suffix(".json").read_text())
        except (OSError, json.JSONDecodeError):
            self.misses.append(f"{case.id}: not in the cache")
            return None
        key = self.key(case, pipeline, arch)
        if entry.get("key") != key:
            differs = [k for k in key if entry.get("key", {}).get(k) != key[k]]
            self.misses.append(f"{case.id}: the cache's {', '.join(differs)} differs")
            return None
        self.hits += 1
        if entry["status"] != "ok":
            return Compiled(error=entry["error"])
        npz = base.with_suffix(".npz")
        constants = dict(np.load(npz)) if npz.exists() else {}
        return Compiled(base.with_suffix(".ir").read_text(), constants, kernels=entry["kernels"])


def irforge_system(name: str, pipeline: str, cache: CompileCache | None) -> System:
    """The system that runs a case through irforge: from the cache when it has the case, else compiled here."""

    def build(case: Case, program: torch.nn.Module):
        from irforge.compiler import params_in_use
        from irforge.parser import parse_module
        from irforge.runtime import Executor
        from irforge.runtime.nvrtc import default_arch

        arch = default_arch()
        compiled = cache.load(case, pipeline, arch) if cache else None
        if compiled is None:
            compiled = compile_case(case, pipeline, arch)
            if cache:
                cache.store(case, pipeline, arch, compiled)
        if compiled.error:
            raise CaseError(compiled.error)
        module = parse_module(compiled.text)
        weights = params_in_use(module, dict([*program.named_parameters(), *program.named_buffers()]))
        return executor_fn(Executor(module, params={**compiled.constants, **weights}))

    return System(name, build)
