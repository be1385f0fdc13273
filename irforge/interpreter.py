"""Reference interpreters, one per level, behind one entry point: `interpret(module, inputs, params)`.

Each dialect names its interpreter in `Dialect.interpreter` ("module:callable"); `interpret` picks the one for the
module's level (the least-lowered level any op belongs to) and calls it with the same arguments:

    outputs = interpret(module, inputs, params, entry="forward", seed=0)

- `inputs`: the entry function's arguments, a list in order or a dict by argument name; missing ones (or `None`)
  are drawn at random from `seed`.
- `params`: {name: array} for the module's params (`@name`); a missing param is drawn at random from its name
  and `seed`, so IR read from a file runs without its weights, reproducibly.
- Arrays are numpy arrays in `scalar_ops` representation (`numpy_dtype`: bf16 values held in float32).
- The result is the list of the entry function's return values.

These interpreters are the oracle of every numeric test: a pass is correct when the interpreter gives the same
answer before and after it (`irforge.testing`).
"""

from __future__ import annotations

import importlib
import zlib

import numpy as np

from .diagnostics import error
from .dialect import level_index
from .ir import Operation
from .scalar_ops import numpy_dtype, quantize
from .types import TensorType


def interpret(module: Operation, inputs=None, params=None, *, entry: str = "forward", seed: int = 0) -> list:
    """Run `module`'s entry function with the reference interpreter of its level."""
    return interpreter_for(module)(module, inputs, params, entry=entry, seed=seed)


def interpreter_for(module: Operation):
    from .pipeline import module_level
    from .registry import registry

    level = module_level(module)
    # A module with no op of any level (a function returning its arguments) means the same to every interpreter.
    candidates = [d for d in registry().dialects().values() if d.interpreter and d.level is not None]
    for d in sorted(candidates, key=lambda d: level_index(d.level)):
        if level is None or d.level == level:
            mod, _, fn = d.interpreter.partition(":")
            return getattr(importlib.import_module(mod), fn)
    raise error(f"no reference interpreter is registered for the {level} level")


def entry_function(module: Operation, name: str = "forward") -> Operation:
    """The `func.func @name` of the module; a module with one function may call it anything."""
    funcs = [op for op in module.body.ops if op.name == "func.func"]
    for f in funcs:
        if f.attributes["sym_name"] == name:
            return f
    if len(funcs) == 1:
        return funcs[0]
    have = ", ".join("@" + f.attributes["sym_name"] for f in funcs) or "none"
    raise error(f"no function @{name} to run (functions: {have})", module.loc)


def random_array(t: TensorType, rng: np.random.Generator, index_bound: int | None = None) -> np.ndarray:
    """Random values of type `t`: normal floats, integers in [0, index_bound) (default [0, 8)), random bools."""
    d = t.dtype
    if d.is_float:
        return quantize(rng.standard_normal(t.shape, dtype=np.float64), d)
    if d.name == "bool":
        return rng.random(t.shape) < 0.5
    hi = index_bound if index_bound is not None else 8
    return rng.integers(0, max(hi, 1), size=t.shape).astype(numpy_dtype(d))


def as_array(value, t: TensorType, what: str) -> np.ndarray:
    """`value` (numpy array, torch tensor, Python number) checked against `t`, in `scalar_ops` representation."""
    if type(value).__module__.startswith("torch"):
        value = _torch_to_numpy(value)
    a = np.asarray(value)
    if a.shape != t.shape:
        raise error(f"{what} has shape {list(a.shape)}, but the IR expects {t}")
    if a.dtype.kind != np.dtype(numpy_dtype(t.dtype)).kind and not (a.dtype.kind in "iub" and t.dtype.is_int):
        raise error(f"{what} has element type {a.dtype}, but the IR expects {t}")
    return np.array(quantize(a, t.dtype))  # the interpreters' own copy: kernels may store into their inputs


def _torch_to_numpy(x):
    import torch

    x = x.detach().cpu()
    if x.dtype == torch.bfloat16:
        x = x.float()
    return x.numpy()


def bind_inputs(func: Operation, inputs, seed: int, index_bounds=None) -> list[np.ndarray]:
    """The entry function's arguments as arrays: given ones checked, missing ones random (seeded)."""
    args = func.body.args
    names = [a.name_hint or f"arg{i}" for i, a in enumerate(args)]
    if inputs is None:
        inputs = {}
    if isinstance(inputs, dict):
        unknown = sorted(set(inputs) - set(names))
        if unknown:
            raise error(f"no input named {', '.join(unknown)} (inputs: {', '.join(names)})", func.loc)
        given = [inputs.get(n) for n in names]
    else:
        given = list(inputs)
        if len(given) != len(args):
            raise error(f"@{func.attributes['sym_name']} takes {len(args)} input(s), got {len(given)}", func.loc)
    out = []
    for i, (a, n, v) in enumerate(zip(args, names, given)):
        if not isinstance(a.type, TensorType):
            raise error(f"input %{n} has type {a.type}; interpreters take tensors", func.loc)
        if v is None:  # one generator per argument: each input's values do not depend on the others' types
            out.append(random_array(a.type, np.random.default_rng([seed, i]), (index_bounds or {}).get(a)))
        else:
            out.append(as_array(v, a.type, f"input %{n}"))
    return out


def param_value(name: str, t: TensorType, params, seed: int, index_bound: int | None = None) -> np.ndarray:
    """The value of param `@name`: from `params`, else random from the name and seed (the same every run)."""
    if params is not None and name in params:
        return as_array(params[name], t, f"param @{name}")
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    return random_array(t, rng, index_bound)
