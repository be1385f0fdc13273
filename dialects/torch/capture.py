"""Capture: a PyTorch program (an `nn.Module` and example inputs) to the torch dialect, through `torch.export`.

`torch.export` traces the program; `run_decompositions` then lowers it to core ATen, except the high-level ops
irforge decomposes itself (`KEPT_WHOLE`: norms, linear, attention, activations, softmax, embedding, ...), which stay
one op each so the torch level reads like the program. Every op is located at the user's source line (file, line
and column of the call in the user's code, found by a `TorchFunctionMode` while tracing); parameters, buffers and
captured constant tensors become `torch.param @name` with their values in the returned param store.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from dataclasses import dataclass

import numpy as np
import torch
import torch.fx.traceback as fx_traceback
from torch.overrides import TorchFunctionMode

from irforge.attributes import UNIT, DictAttr, SymbolRef
from irforge.builtin import FuncOp, ModuleOp, ReturnOp
from irforge.diagnostics import IRForgeError, error
from irforge.location import UNKNOWN, FileLineColLoc, Location
from irforge.pass_manager import frozen_heap
from irforge.types import ScalarType, TensorType

from . import AtenOp, ParamOp
from .aten import DTYPES, quiet

_A = torch.ops.aten

# High-level ops irforge decomposes itself: kept whole instead of taking PyTorch's decomposition.
KEPT_WHOLE = (
    _A.rms_norm.default,
    _A.layer_norm.default,
    _A.linear.default,
    _A.matmul.default,
    _A.scaled_dot_product_attention.default,
    _A.silu.default,
    _A.gelu.default,
    _A.softmax.int,
    _A.log_softmax.int,
    _A.embedding.default,
    _A.var.correction,
    _A.std.correction,
    _A.mean.dim,
    _A.pow.Tensor_Scalar,
    _A.roll.default,
)

# Keyword arguments that say where or how a tensor is stored, never what it holds.
_STORAGE_KWARGS = frozenset({"device", "layout", "pin_memory", "memory_format", "non_blocking"})
# Graph bookkeeping with no value to compute.
_SKIPPED = frozenset({"aten._assert_tensor_metadata", "aten._assert_scalar", "aten.sym_constrain_range_for_size"})


def _internal_dirs() -> tuple[str, ...]:
    """Where torch, irforge and the standard library live: frames there are never the user's."""
    import irforge.dialects
    import irforge.passes

    import irforge

    mods = (torch, irforge, irforge.dialects, irforge.passes)
    dirs = [os.path.dirname(m.__file__) for m in mods] + [sysconfig.get_paths()["stdlib"]]
    return tuple(os.path.join(d, "") for d in dirs)


_INTERNAL_DIRS = _internal_dirs()
# The bench suites' programs (irforge/bench/) are user programs: a refusal points into them.
_BENCH_DIR = os.path.join(os.path.dirname(sys.modules["irforge"].__file__), "bench", "")


def dtype_of(dt: torch.dtype, loc: Location = UNKNOWN) -> ScalarType:
    name = DTYPES.get(dt)
    if name is None:
        raise error(f"unsupported dtype {str(dt).removeprefix('torch.')}: irforge handles {_dtype_list()}", loc)
    return ScalarType(name)


def _dtype_list() -> str:
    return ", ".join(str(d).removeprefix("torch.") for d in DTYPES)


def tensor_type(t: torch.Tensor, loc: Location = UNKNOWN, what: str = "a tensor") -> TensorType:
    shape = []
    for d in t.shape:
        if not isinstance(d, int):
            raise error(
                f"the shape of {what} ({list(t.shape)}) depends on the data: irforge compiles static shapes only", loc
            )
        shape.append(d)
    return TensorType(dtype_of(t.dtype, loc), tuple(shape))


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A copy of `t` that later changes to `t` do not reach (bf16 as f32, which numpy lacks)."""
    c = t.detach().cpu()
    if c.dtype == torch.bfloat16:
        c = c.float()
    # Copied once: the conversions above already made a tensor of its own (a layer's weights are 100s of MB).
    return c.numpy() if c.data_ptr() != t.data_ptr() else c.numpy().copy()


# ---- locations -------------------------------------------------------------------------------------------------
def _is_user_file(filename: str) -> bool:
    if filename.startswith("<") and not filename.startswith(("<snippet", "<stdin")):
        return False
    return not filename.startswith(_INTERNAL_DIRS) or filename.startswith(_BENCH_DIR)


def user_location(frame) -> Location:
    """The innermost user-code position on the stack from `frame` (file, line, 1-based column)."""
    while frame is not None and not _is_user_file(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return UNKNOWN
    positions = list(frame.f_code.co_positions())
    line, _, col, _ = positions[frame.f_lasti // 2] if frame.f_lasti // 2 < len(positions) else (None,) * 4
    line = line or frame.f_lineno
    return FileLineColLoc(frame.f_code.co_filename, line, (col or 0) + 1)


class _Locate(TorchFunctionMode):
    """Tags every node traced during a user-level torch call with the user's source position."""

    def __init__(self):
        super().__init__()
        self.failed_at: tuple[str, Location] | None = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        loc = user_location(sys._getframe(1))
        try:
            with fx_traceback.annotate({"irforge_loc": _encode(loc)}):
                return func(*args, **(kwargs or {}))
        except Exception:
            if self.failed_at is None:
                self.failed_at = (getattr(func, "__name__", str(func)), loc)
            raise


def _encode(loc: Location):
    return (loc.file, loc.line, loc.col) if isinstance(loc, FileLineColLoc) else None


def _node_loc(node) -> Location:
    enc = (node.meta.get("custom") or {}).get("irforge_loc")
    if enc:
        return FileLineColLoc(*enc)
    # Fall back on the recorded stack trace: its last frame in user code, without a column.
    trace = node.meta.get("stack_trace") or ""
    best = UNKNOWN
    for line in trace.splitlines():
        line = line.strip()
        if line.startswith('File "'):
            fname, _, rest = line[6:].partition('", line ')
            num = rest.split(",")[0]
            if _is_user_file(fname) and num.isdigit():
                best = FileLineColLoc(fname, int(num), 1)
    return best


# ---- export ----------------------------------------------------------------------------------------------------
@dataclass
class Captured:
    module: ModuleOp
    params: dict[str, np.ndarray]
    state: dict[str, np.ndarray]  # initial values of the state (buffers the program updates), by name
    scopes: dict  # op -> path of the innermost module whose call produced it ("" for the top level)


def export(model: torch.nn.Module, inputs: tuple) -> torch.export.ExportedProgram:
    """`torch.export` with every node located, decomposed to core ATen except `KEPT_WHOLE`."""
    mode = _Locate()
    try:
        with quiet():  # a data-dependent shape, for one, prints the partial FX graph
            return _export(model, inputs, mode)
    except IRForgeError:
        raise
    except Exception as e:
        raise _capture_error(e, mode.failed_at) from None


def _export(model, inputs, mode):
    with fx_traceback.preserve_node_meta(), mode:
        ep = torch.export.export(model, tuple(inputs))
    # Outside the mode: retracing the graph must keep the user's locations, not take the tracer's.
    table = torch.export.default_decompositions()
    for op in KEPT_WHOLE:
        table.pop(op, None)
    return ep.run_decompositions(table)


def _capture_error(e: Exception, failed_at) -> IRForgeError:
    text = str(e)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(e).__name__)
    func, loc = failed_at if failed_at else ("the program", UNKNOWN)
    data_dependent = (
        "data-dependent" in text
        or "data dependent" in text
        or "DataDependent" in type(e).__name__
        or "GuardOnDataDependent" in text
    )
    if data_dependent:
        return error(
            f"'{func}' gives a shape that depends on the data, which torch.export cannot capture; "
            "irforge compiles programs whose shapes are known at compile time",
            loc,
        )
    return error(f"torch.export cannot capture '{func}': {first}", loc)


def capture(
    model: torch.nn.Module, inputs: tuple, input_names: list[str], entry: str = "forward", *, values: bool = True
) -> Captured:
    """Export `model` on `inputs` and translate the graph to a torch-dialect module. With `values=False` the
    param store and initial state stay empty (a model on the meta device, whose weights come from elsewhere)."""
    with frozen_heap():  # export and translation allocate as passes do
        ep = export(model, inputs)
        return Translator(ep, input_names, values=values).run(entry)


class Translator:
    """One exported graph to one `func.func`: placeholders become arguments or params, calls become ops."""

    def __init__(self, ep: torch.export.ExportedProgram, input_names: list[str], *, values: bool = True):
        self.ep = ep
        self.keep_values = values
        self.scopes: dict = {}  # op -> the path of the innermost module whose call produced it
        self.input_names = list(input_names)
        self.values: dict = {}  # fx node -> Value, or tuple of Values for multi-result ops
        self.params: dict[str, np.ndarray] = {}
        self.state: dict[str, np.ndarray] = {}  # the initial values of the buffers the program updates

    def run(self, entry: str) -> Captured:
        from torch.export.graph_signature import InputKind, OutputKind

        sig = self.ep.graph_signature
        graph = self.ep.graph_module.graph
        nodes = {n.name: n for n in graph.nodes}
        kinds = (OutputKind.USER_OUTPUT, OutputKind.BUFFER_MUTATION)
        bad_out = [o for o in sig.output_specs if o.kind not in kinds]
        effect = next((n for n in graph.nodes if n.target is torch.ops.higher_order.with_effects), None)
        if effect is not None:  # an op torch.export orders by an effect token: a check that raises, a print, ...
            name = effect.args[1]._schema.name.replace("::", ".")
            raise error(
                f"'{name}' has a side effect; irforge compiles programs without side effects", _node_loc(effect)
            )
        if bad_out:
            what = ", ".join(str(o.target) for o in bad_out)
            raise error(
                f"the program mutates {what}; irforge compiles programs whose only side effects are updates of buffers"
            )
        # Buffers the program updates in place are its state: arguments on entry, results on exit.
        mutated = [o.target for o in sig.output_specs if o.kind == OutputKind.BUFFER_MUTATION]
        user_inputs = [s for s in sig.input_specs if s.kind == InputKind.USER_INPUT]
        state_inputs = sorted(
            (s for s in sig.input_specs if s.kind == InputKind.BUFFER and s.target in mutated),
            key=lambda s: mutated.index(s.target),
        )
        names = _unique(self.input_names + [s.arg.name for s in user_inputs][len(self.input_names) :])
        names = names[: len(user_inputs)] + mutated
        arg_types = [tensor_type(nodes[s.arg.name].meta["val"]) for s in user_inputs + state_inputs]
        attrs = {"state": tuple(mutated)} if mutated else None
        func = FuncOp.build(entry, arg_types, [], arg_hints=names, attributes=attrs)
        body = func.body
        for s, a in zip(user_inputs + state_inputs, body.args):
            self.values[nodes[s.arg.name]] = a
        for s in sig.input_specs:
            if s.kind == InputKind.USER_INPUT or s in state_inputs:
                continue
            node = nodes[s.arg.name]
            value = self._param_value(s)
            op = ParamOp([], [tensor_type(value)], {"sym": SymbolRef(s.target)}, result_hints=[s.target])
            body.append(op)
            if self.keep_values:
                self.params[s.target] = to_numpy(value)
            self.values[node] = op.result
        for s in state_inputs if self.keep_values else ():
            self.state[s.target] = to_numpy(self.ep.state_dict.get(s.target, self.ep.constants.get(s.target)))
        results: dict = {}  # output spec kind -> values, in order
        for node in graph.nodes:
            if node.op == "call_function":
                self._call(node, body)
            elif node.op == "output":
                for spec, o in zip(sig.output_specs, node.args[0]):
                    if o is None or o not in self.values or not hasattr(self.values[o], "type"):
                        raise error("the program must return tensors (one, or a tuple of them)")
                    results.setdefault(spec.kind, []).append(self.values[o])
        outputs = results.get(OutputKind.USER_OUTPUT, []) + results.get(OutputKind.BUFFER_MUTATION, [])
        body.append(ReturnOp(outputs))
        func.attributes["function_type"] = type(func.attributes["function_type"])(
            tuple(a.type for a in body.args), tuple(v.type for v in outputs)
        )
        module = ModuleOp()
        module.body.append(func)
        return Captured(module, self.params, self.state, self.scopes)

    def _param_value(self, spec) -> torch.Tensor:
        if spec.target in self.ep.state_dict:
            return self.ep.state_dict[spec.target]
        return self.ep.constants[spec.target]

    def _call(self, node, body) -> None:
        import operator

        loc = _node_loc(node)
        target = node.target
        if target is operator.getitem:
            src, i = node.args
            self.values[node] = self.values[src][i]
            return
        if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten":
            raise error(f"unsupported operation '{target}' in the captured graph (not an ATen op)", loc)
        packet, overload = target._schema.name.split("::")[1], target._overloadname
        aten = f"aten.{packet}" + ("" if overload == "default" else f".{overload}")
        if aten in _SKIPPED:
            return
        operands: list = []
        args = tuple(self._arg(a, operands, loc) for a in node.args)
        kwargs = {k: self._arg(v, operands, loc) for k, v in sorted(node.kwargs.items()) if k not in _STORAGE_KWARGS}
        val = node.meta.get("val")
        vals = list(val) if isinstance(val, (tuple, list)) else [val]
        if any(not isinstance(v, torch.Tensor) for v in vals):
            raise error(f"'{aten}' gives {type(vals[0]).__name__}, not tensors: irforge compiles tensor programs", loc)
        types = [tensor_type(v, loc, f"'{aten}'") for v in vals]
        attrs = {"args": args, **({"kwargs": DictAttr(kwargs)} if kwargs else {})}
        hints = [node.name] if len(types) == 1 else [f"{node.name}_{i}" for i in range(len(types))]
        op = AtenOp(operands, types, attrs, loc=loc, name=f"torch.{aten}", result_hints=hints)
        body.append(op)
        stack = node.meta.get("nn_module_stack") or {}
        self.scopes[op] = next(reversed(stack.values()))[0] if stack else ""
        self.values[node] = op.results[0] if len(types) == 1 and not isinstance(val, (tuple, list)) else op.results

    def _arg(self, a, operands: list, loc: Location):
        if isinstance(a, torch.fx.Node):
            v = self.values.get(a)
            if v is None or not hasattr(v, "type"):
                raise error(f"argument '{a.name}' is not a tensor the graph computes", loc)
            operands.append(v)
            return UNIT
        if isinstance(a, (list, tuple)):
            return tuple(self._arg(x, operands, loc) for x in a)
        if isinstance(a, torch.dtype):
            return dtype_of(a, loc)
        if a is None or isinstance(a, (bool, int, float, str)):
            return a
        if isinstance(a, (torch.device, torch.layout, torch.memory_format)):
            return str(a)
        raise error(f"unsupported argument {a!r} ({type(a).__name__}) in the captured graph", loc)


def _unique(names: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for n in names:
        base, k = n, 0
        while n in seen:
            k += 1
            n = f"{base}_{k}"
        seen.add(n)
        out.append(n)
    return out
