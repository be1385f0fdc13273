"""ATen's own rules for the torch dialect: the installed PyTorch decides whether a call is valid and what it gives.

`answer(op, key)` runs the op's ATen overload on fake tensors (shapes and dtypes, no data) with the op's other
arguments: PyTorch's schema checks the argument count and types, its meta functions the shapes and the result
dtype. The verifier then compares what ATen gives with what the op declares. Kernels that reject a dtype do so
only when they run, not in their meta functions (`softmax` of an integer tensor), so the call is also run on real
CPU tensors of the same dtypes with every dimension 1 and a missing kernel ("not implemented for 'Long'")
refuses it. Answers are kept per signature (op, argument types and values), in the process and on disk by
PyTorch's version (`answers.py`): the verifier runs after every pass, and a process whose answers are all kept
never imports PyTorch.

The argument conversions (`call_value`) are shared with the torch interpreter, which runs the same overloads.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import logging
import os
import pickle
import re
import signal
import warnings

import torch
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException, FakeTensorMode

from irforge.ir import Value
from irforge.types import ScalarType, TensorType

from . import answers

DTYPES = {
    torch.float64: "f64",
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "bool",
}
_BY_NAME = {name: dt for dt, name in DTYPES.items()} | {"index": torch.int64}
_NO_KERNEL = re.compile(r"not implemented for '")  # ATen's message for a dtype its kernel does not dispatch
_PROBE_ELEMENTS = 1 << 16


def torch_dtype(t: ScalarType) -> torch.dtype:
    return _BY_NAME[t.name]


@contextlib.contextmanager
def quiet():
    """PyTorch's warnings, logs and printouts silenced while irforge asks it something (capture, inference): what
    goes wrong becomes one located error instead."""
    level = logging.root.manager.disable
    logging.disable(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(level)


def aten_overload(aten_name: str) -> torch._ops.OpOverload:
    """`torch.ops.aten.add.Tensor` for "aten.add.Tensor" (the default overload when none is named); LookupError
    when the installed PyTorch has no such op."""
    parts = aten_name.split(".")
    if len(parts) not in (2, 3) or parts[0] != "aten":
        raise LookupError(aten_name)
    try:
        packet = getattr(torch.ops.aten, parts[1])
        return getattr(packet, parts[2] if len(parts) > 2 else "default")
    except (AttributeError, RuntimeError):
        raise LookupError(aten_name) from None


def call_value(a, schema_type=None):
    """An attribute as the Python value ATen takes: dtypes become torch dtypes; a layout, device or memory format
    (captured as text: "torch.strided", "cpu") becomes the torch object when the schema asks for one."""
    if isinstance(a, ScalarType):
        return torch_dtype(a)
    if isinstance(a, list):
        return [call_value(x) for x in a]
    if isinstance(a, str) and schema_type is not None:
        kind = str(schema_type).removesuffix("?")
        if kind == "Device":
            return torch.device(a)
        if kind in ("Layout", "MemoryFormat"):
            return getattr(torch, a.removeprefix("torch."), a)
    return a


def schema_types(fn, n_args: int, kwargs) -> tuple[list, dict]:
    """The schema's type of each positional argument (None past the schema's end) and of each keyword."""
    args = fn._schema.arguments
    by_name = {a.name: a.type for a in args}
    return [args[i].type if i < len(args) else None for i in range(n_args)], {k: by_name.get(k) for k in kwargs}


def answer(op, key: tuple) -> list[TensorType] | str:
    """What ATen gives for the call `op` makes (its result types), or why PyTorch refuses it: it does not know the
    op, refuses the arguments, or has no kernel for their dtypes. Kept by `answers` under `key`."""
    args, kwargs = op.call_args()
    # Some of PyTorch's own checks divide by a size and crash the process when it is 0 (sdpa's heads): calls with an
    # empty operand ask PyTorch from a forked copy of this process.
    empty = any(0 in v.type.shape for v in op.operands)
    with quiet():
        result = (_isolated if empty else _direct)(_infer, op.aten_name, args, kwargs)
    answers.remember(key, result)
    return result


def _direct(fn, *args):
    return fn(*args)


def _isolated(fn, *args):
    """`fn(*args)` (picklable answer) in a forked child, so that a crash in PyTorch is a message, not our end."""
    if not hasattr(os, "fork"):
        return fn(*args)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer through the pipe, and leave without running the parent's cleanup
        try:
            faulthandler.disable()  # a crash here is the expected answer, not worth a dump
            os.close(read)
            with os.fdopen(write, "wb") as f:
                pickle.dump(fn(*args), f)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) or not data:
        why = signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status) else "no answer"
        return f"crashes PyTorch {torch.__version__} ({why}) instead of being checked; irforge cannot take it"
    return pickle.loads(data)


def _infer(aten_name: str, args, kwargs) -> list[TensorType] | str:
    """The result types, or why the call is refused (a message)."""
    try:
        fn = aten_overload(aten_name)
    except LookupError:
        return f"is not an ATen op PyTorch {torch.__version__} knows"
    arg_types, kwarg_types = schema_types(fn, len(args), kwargs)
    try:
        with FakeTensorMode():
            out = _call(
                fn, args, kwargs, arg_types, kwarg_types, lambda t: torch.empty(t.shape, dtype=torch_dtype(t.dtype))
            )
    except (DataDependentOutputException, DynamicOutputShapeException):
        return "gives a shape (or value) that depends on the data; irforge compiles static shapes"
    except Exception as e:  # the schema's or a meta function's refusal, in PyTorch's words
        return f"is not a valid ATen call: {_first_line(e)}"
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    types = []
    for o in outs:
        if not isinstance(o, torch.Tensor):
            return f"gives {type(o).__name__}, not tensors"
        if o.dtype not in DTYPES:
            return f"gives a {str(o.dtype).removeprefix('torch.')} tensor, which irforge does not handle"
        types.append(TensorType(ScalarType(DTYPES[o.dtype]), tuple(o.shape)))
    missing = _missing_kernel(fn, args, kwargs, arg_types, kwarg_types)
    return f"has no ATen kernel for these dtypes: {missing}" if missing else types


def _missing_kernel(fn, args, kwargs, arg_types, kwarg_types) -> str | None:
    """A dtype the kernel itself refuses shows only when it runs: run it on tensors of one element per dimension
    (when that call is valid and small), and return PyTorch's message if the kernel is missing."""
    tiny = lambda t: torch.zeros((1,) * t.rank, dtype=torch_dtype(t.dtype))
    try:
        with FakeTensorMode():
            out = _call(fn, args, kwargs, arg_types, kwarg_types, tiny)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if sum(o.numel() for o in outs if isinstance(o, torch.Tensor)) > _PROBE_ELEMENTS:
            return None
        _call(fn, args, kwargs, arg_types, kwarg_types, tiny)
    except Exception as e:  # the shrunk arguments may not fit the other arguments (a view's sizes): no verdict
        return _first_line(e) if _NO_KERNEL.search(str(e)) else None
    return None


def _call(fn, args, kwargs, arg_types, kwarg_types, tensor):
    def conv(a, t):
        if isinstance(a, Value):
            return tensor(a.type)
        if isinstance(a, list):
            return [conv(x, None) for x in a]
        return call_value(a, t)

    return fn(*[conv(a, t) for a, t in zip(args, arg_types)], **{k: conv(v, kwarg_types[k]) for k, v in kwargs.items()})


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
