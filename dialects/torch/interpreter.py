"""The torch dialect's reference interpreter: each op runs as its ATen op in PyTorch eager (on the CPU).

IR halfway through torch-to-tensor (torch and tensor ops together) runs too: tensor ops go to the tensor
dialect's interpreter, so every decomposition pass can be checked on its own.
"""

from __future__ import annotations

import numpy as np

from irforge.diagnostics import error
from irforge.interpreter import bind_inputs, entry_function, param_value
from irforge.ir import Operation, Value
from irforge.types import ScalarType

from .aten import aten_overload, call_value, schema_types, torch_dtype

# Ops whose argument names the index range of another tensor: (argument position of the indices, of the table,
# dimension of the table they index, or None for "the dimension given at argument 1").
_INDEXING = {"aten.embedding": (1, 0, 0), "aten.index_select": (2, 0, None), "aten.gather": (2, 0, None)}


def interpret(module: Operation, inputs=None, params=None, *, entry: str = "forward", seed: int = 0) -> list:
    import torch

    func = entry_function(module, entry)
    bounds = index_bounds(func)
    env = {a: to_torch(v, a.type.dtype) for a, v in zip(func.body.args, bind_inputs(func, inputs, seed, bounds))}
    for op in func.body.ops:
        if op.name == "func.return":
            return [to_numpy(env[v]) for v in op.operands]
        if op.name == "torch.param":
            t = op.result.type
            env[op.result] = to_torch(param_value(op.attributes["sym"].name, t, params, seed), t.dtype)
            continue
        if op.name == "tensor.param":
            t = op.result.type
            env[op.result] = to_torch(param_value(op.attributes["sym"].name, t, params, seed), t.dtype)
            continue
        if op.dialect == "tensor":  # IR halfway through torch-to-tensor: tensor ops run in their own interpreter
            from irforge.dialects.tensor.interpreter import evaluate_op

            env[op.result] = to_torch(evaluate_op(op, [to_numpy(env[v]) for v in op.operands]), op.result.type.dtype)
            continue
        if not op.name.startswith("torch.aten."):
            raise op.error("has no meaning in the torch interpreter")
        args, kwargs = op.call_args()

        def conv(a, t=None):
            if isinstance(a, list):
                return [conv(x) for x in a]
            return env[a] if isinstance(a, Value) else call_value(a, t)

        try:
            # views replay as reshapes: the values are the same, and replayed strides may not allow a view
            fn = aten_overload("aten.reshape" if op.packet in ("aten.view", "aten._unsafe_view") else op.aten_name)
        except LookupError:
            raise op.error(f"is not an ATen op PyTorch {torch.__version__} knows") from None
        arg_types, kwarg_types = schema_types(fn, len(args), kwargs)
        try:
            out = fn(
                *[conv(a, t) for a, t in zip(args, arg_types)],
                **{k: conv(v, kwarg_types[k]) for k, v in kwargs.items()},
            )
        except (RuntimeError, TypeError, ValueError, IndexError) as e:
            raise op.error(f"failed in PyTorch: {str(e).splitlines()[0]}") from None
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        for r, o in zip(op.results, outs):
            env[r] = o
    raise func.error("has no func.return")


def index_bounds(func: Operation) -> dict:
    """Inputs and params used as indices, with the extent they index (so random indices stay in range)."""
    bounds = {}

    def bound(idx, n):
        if hasattr(idx, "type"):
            bounds[idx] = min(bounds.get(idx, n), n)

    for op in func.body.ops:
        if op.name == "torch.aten.index.Tensor":  # x[i0, i1, ...]: each index tensor picks along its dimension
            x, indices = op.arg(0, "self"), op.arg(1, "indices")
            for d, idx in enumerate(indices):
                bound(idx, x.type.shape[d])
            continue
        spec = _INDEXING.get(getattr(op, "packet", None))
        if spec is None:
            continue
        args, _ = op.call_args()
        i_idx, i_table, dim = spec
        if len(args) <= max(i_idx, i_table):
            continue
        idx, table = args[i_idx], args[i_table]
        d = dim if dim is not None else args[1]
        if hasattr(table, "type") and isinstance(d, int):
            bound(idx, (table.type.shape or (1,))[d])  # a 0-d table: one element along dim 0 (or -1)
    return bounds


def to_torch(a: np.ndarray, t: ScalarType):
    import torch

    return torch.from_numpy(np.require(a, requirements="C")).to(torch_dtype(t))  # ascontiguousarray makes 0-d 1-d


def to_numpy(x) -> np.ndarray:
    import torch

    if not isinstance(x, torch.Tensor):
        raise error(f"the program returned {type(x).__name__}, not a tensor")
    x = x.detach()
    return (x.float() if x.dtype == torch.bfloat16 else x).numpy()
