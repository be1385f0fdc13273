"""Testing passes, in irforge and in plugins: numeric checks (shared by `irforge compile --check`,
`--check-numerics` / `--bisect-numerics` and every pass's numeric test, at any level), lit setup, and (in
`strategies`) random programs.

    check_pipeline(module, "tensor-fold-constants")          # interpreters agree before and after, or raise
    compare(actual, expected, dtype)                         # -> Comparison(max_abs, max_rel, tol, ok)
    NumericsCheck(bisect=True)                               # a pass-manager hook: the first pass that changes it
    irforge.testing.lit_config(config)                       # in a lit.cfg.py: irforge's lit setup

Errors are measured normwise: `max_rel = max|actual - expected| / max|expected|`, which stays meaningful for
outputs near zero (where elementwise relative error is noise). An output passes when `max_abs <= tol * max(1,
max|expected|)`: normwise relative for outputs of magnitude 1 and more, absolute (like torch.testing's atol) for
smaller ones, whose last bits are rounding noise of larger intermediates. Tolerances follow the output's element
type (`TOLERANCE`); integer and bool outputs must match exactly; NaNs and infinities must sit in the same places.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..diagnostics import IRForgeError, error
from ..ir import Operation
from ..pass_manager import Instrumentation
from ..types import ScalarType

# Normwise relative tolerance per output type: f32 as the task requires; half types a few units in the last place
# of their 11 (f16) and 8 (bf16) significant bits, since f32 intermediates may round differently.
TOLERANCE = {"f64": 1e-12, "f32": 1e-5, "f16": 4e-3, "bf16": 3.2e-2}


@dataclass
class Comparison:
    max_abs: float
    max_rel: float
    tol: float
    ok: bool
    note: str = ""

    def __str__(self) -> str:
        verdict = "ok" if self.ok else "MISMATCH"
        s = f"max abs error {self.max_abs:.3g}, max rel error {self.max_rel:.3g} (tolerance {self.tol:.3g}): {verdict}"
        return s + (f" ({self.note})" if self.note else "")


def tolerance(dtype: ScalarType) -> float:
    return TOLERANCE.get(dtype.name, 0.0)


def compare(actual, expected, dtype: ScalarType, tol: float | None = None) -> Comparison:
    """How far `actual` is from `expected` (arrays of one output), and whether that is within tolerance."""
    tol = tolerance(dtype) if tol is None else tol
    a = np.asarray(actual)
    e = np.asarray(expected)
    if a.shape != e.shape:
        return Comparison(np.inf, np.inf, tol, False, f"shape {list(a.shape)} instead of {list(e.shape)}")
    if not dtype.is_float:
        diff = np.abs(a.astype(np.float64) - e.astype(np.float64)) if a.size else np.zeros(0)
        m = float(diff.max()) if diff.size else 0.0
        scale = float(np.abs(e.astype(np.float64)).max()) if e.size else 0.0
        return Comparison(m, m / scale if scale else m, 0.0, m == 0.0)
    a = a.astype(np.float64)
    e = e.astype(np.float64)
    same_special = np.array_equal(np.isnan(a), np.isnan(e)) and np.array_equal(a[np.isinf(a)], e[np.isinf(a)])
    same_special = same_special and np.array_equal(np.isinf(a), np.isinf(e))
    finite = np.isfinite(e) & np.isfinite(a)
    diff = np.abs(a[finite] - e[finite])
    max_abs = float(diff.max()) if diff.size else 0.0
    scale = float(np.abs(e[finite]).max()) if diff.size else 0.0
    max_rel = max_abs / scale if scale > 0 else max_abs
    note = "" if same_special else "NaN or infinity where the reference has none, or the reverse"
    return Comparison(max_abs, max_rel, tol, same_special and max_abs <= tol * max(scale, 1.0), note)


def compare_outputs(actual: list, expected: list, types: list) -> list[Comparison]:
    if len(actual) != len(expected):
        raise error(f"{len(actual)} output(s) where the reference has {len(expected)}")
    return [compare(a, e, t.dtype) for a, e, t in zip(actual, expected, types)]


def output_types(module: Operation, entry: str = "forward") -> list:
    from ..interpreter import entry_function

    return list(entry_function(module, entry).attributes["function_type"].outputs)


def check_pipeline(module: Operation, pipeline: str, inputs=None, params=None, *, seeds=(0,), entry="forward"):
    """Run `pipeline` on a copy of `module`; the reference interpreters must agree before and after.

    Works at any level (each side runs the interpreter of its own level). Missing inputs and params are drawn
    from each seed. Returns the transformed copy; raises AssertionError naming the output that differs.
    """
    from ..interpreter import interpret
    from ..pass_manager import run_pipeline

    after = module.clone()
    run_pipeline(after, pipeline)
    types = output_types(module, entry)
    for seed in seeds:
        want = interpret(module, inputs, params, entry=entry, seed=seed)
        got = interpret(after, inputs, params, entry=entry, seed=seed)
        for i, c in enumerate(compare_outputs(got, want, types)):
            if not c.ok:
                raise AssertionError(f"'{pipeline}' changed output #{i} (seed {seed}): {c}")
    return after


class NumericsCheck(Instrumentation):
    """The reference interpreters around a pipeline (`irforge-opt --check-numerics` / `--bisect-numerics`,
    `irforge compile --bisect-numerics`): the answer of the pipeline's input, or `expected` (PyTorch eager's), is
    compared with the answer after the pipeline, or after every pass (`bisect`), where the first pass that changes
    it is named at its place in the pipeline. Missing inputs and params are random (one draw per seed, the same on
    both sides); an interpreter's own report (a race, an out-of-bounds access) says in which IR it was found.
    Passes that leave the IR at a level with no interpreter (cuda) are not checked."""

    def __init__(self, *, bisect: bool = False, inputs=None, params=None, expected=None, seeds=(0,), entry="forward"):
        self.bisect, self.inputs, self.params, self.entry = bisect, inputs, params, entry
        self.seeds = (0,) if expected is not None else tuple(seeds)
        self.given = expected

    def before_pipeline(self, module, pm):
        self.where = {id(sp.pass_): sp.loc for sp in pm.schedule}
        self.types = output_types(module, self.entry)
        self.expected = {s: self.given or self._interpret(module, s, "the pipeline's input IR") for s in self.seeds}

    def after_pass(self, p, module):
        if self.bisect and _has_interpreter(module):
            self._compare(module, f"the IR after pass '{p.name}'", self.where.get(id(p)), p.name)

    def after_pipeline(self, module):
        if self.bisect:
            return
        if not _has_interpreter(module):
            raise error(
                "--check-numerics needs a reference interpreter after the pipeline, and the cuda level has none"
            )
        self._compare(module, "the IR after the pipeline", None, None)

    def _interpret(self, module, seed: int, what: str) -> list:
        from ..interpreter import interpret

        try:
            return interpret(module, self.inputs, self.params, entry=self.entry, seed=seed)
        except IRForgeError as e:
            e.diagnostics[0].message += f" (in {what})"
            raise

    def _compare(self, module, what: str, pass_loc, pass_name: str | None) -> None:
        from ..interpreter import entry_function

        ret = entry_function(module, self.entry).body.ops[-1]
        against = "PyTorch eager on the program's inputs" if self.given else "the pipeline's input"
        for seed in self.seeds:
            got = self._interpret(module, seed, what)
            for i, c in enumerate(compare_outputs(got, self.expected[seed], self.types)):
                if c.ok:
                    continue
                inputs = "" if self.given or self.inputs is not None else f", random inputs of seed {seed}"
                detail = f"output #{i} ({self.types[i]}) against {against}{inputs}: {c}"
                if pass_name is None:
                    hint = "; --bisect-numerics names the first pass that changes it"
                    raise error(f"the pipeline changes the answer: {detail}{hint}", ret.loc)
                notes = [("the output", ret.loc)] if ret.loc.file_line_col() else []
                raise error(f"pass '{pass_name}' changes the answer: {detail}", pass_loc, notes)


def _has_interpreter(module: Operation) -> bool:
    from ..interpreter import interpreter_for

    try:
        interpreter_for(module)
    except IRForgeError:
        return False
    return True


def lit_config(config, name: str = "irforge") -> None:
    """Set up a lit test suite as irforge's own is (call it from the suite's `lit.cfg.py`): shell tests in `.ir`
    and `.test` files (an `Inputs` folder holds files they read), `irforge-opt`, `irforge` and `filecheck` taken
    from the environment of the Python running lit (or `IRFORGE_BIN`), and the variables irforge reads passed on."""
    import os
    import shutil
    import sys

    import lit.formats

    config.name = name
    config.test_format = lit.formats.ShTest(execute_external=False)
    config.suffixes = [".ir", ".test"]
    config.excludes = ["Inputs", "lit.cfg.py"]
    bin_dirs = [d for d in (os.environ.get("IRFORGE_BIN"), os.path.dirname(sys.executable)) if d]
    config.environment["PATH"] = os.pathsep.join([*bin_dirs, os.environ.get("PATH", "")])
    config.environment["PYTHONUNBUFFERED"] = "1"
    for var in ("HOME", "TMPDIR", "PYTHONPATH", "IRFORGE_CACHE_DIR"):
        if var in os.environ:
            config.environment[var] = os.environ[var]
    # Whole-word substitutions (lit applies them as regular expressions), so paths containing the names are untouched.
    for tool in ("irforge-opt", "irforge", "filecheck"):
        path = shutil.which(tool, path=config.environment["PATH"])
        if path is None:
            raise RuntimeError(f"lit: cannot find '{tool}' on {config.environment['PATH']}; install irforge[dev]")
        config.substitutions.append((rf"(?<![\w/.%-]){tool}(?![\w/.-])", path))
