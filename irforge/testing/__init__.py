"""Testing passes, in irforge and in plugins: numeric checks, lit setup, and (in `strategies`) random programs.

    check_pipeline(module, "tensor-fold-constants")          # interpreters agree before and after, or raise
    compare(actual, expected, dtype)                         # -> Comparison(max_abs, max_rel, tol, ok)
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

from ..diagnostics import error
from ..ir import Operation
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
