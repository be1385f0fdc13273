"""The `torch` dialect: the captured ATen graph, one op per ATen call, as Python would write the call.

    %w = torch.param @norm.weight : f32[2048]
    %y = torch.aten.rms_norm(%x, [2048], %w, 1e-06) : f32[1,32,2048]
    %g = torch.aten.gelu(%y, approximate = "tanh") : f32[1,32,2048]
    %v, %i = torch.aten.max.dim(%g, 1) : (f32[1,2048], i64[1,2048])

Every `torch.aten.<op>[.<overload>]` is one op family (`AtenOp`), so any ATen op captures, prints and parses —
whether or not a decomposition to the tensor dialect exists for it. Arguments are positional then keyword, as in
the graph torch.export produced: tensors are operands, everything else (ints, floats, bools, strings, `none`,
lists, dtypes such as `f16`) is an attribute. The verifier holds each call to ATen's own rules (`aten.py`, which
imports torch; this module does not).
"""

from __future__ import annotations

import json
import re

from irforge.attributes import UNIT, DictAttr, SymbolRef
from irforge.dialect import Dialect, grammar_file
from irforge.ir import Operation, Value
from irforge.parser import OpAST, ValueRef
from irforge.types import TensorType

from . import answers

_NO_DEFAULT = object()


class AtenOp(Operation):
    """One ATen call. `args` holds the positional arguments and `kwargs` the keyword ones, with `unit` marking
    each place a tensor operand goes (operands fill them in order: args first, then kwargs by sorted key)."""

    name = "torch.aten."
    attribute_types = {"args": tuple}
    optional_attributes = {"kwargs": DictAttr}
    num_regions = 0
    traits = frozenset({"pure"})

    @property
    def aten_name(self) -> str:
        """`aten.add.Tensor`, as PyTorch names it (`aten.rms_norm` for the default overload)."""
        return self.name[len("torch.") :]

    @property
    def packet(self) -> str:
        """The op without its overload: `aten.add` for `aten.add.Tensor`."""
        return ".".join(self.aten_name.split(".")[:2])

    def call_args(self) -> tuple[list, dict]:
        """Positional and keyword arguments with the operands in their places."""
        operands = iter(self.operands)
        fill = lambda a: next(operands) if a is UNIT else [fill(x) for x in a] if isinstance(a, tuple) else a
        args = [fill(a) for a in self.attributes["args"]]
        kwargs = {k: fill(v) for k, v in self.attributes.get("kwargs", DictAttr()).items()}
        return args, kwargs

    def arg(self, index: int, name: str, default=_NO_DEFAULT):
        """Argument `name` of the schema, passed positionally at `index` or by keyword; `default` when absent."""
        args, kwargs = self.call_args()
        if index < len(args):
            return args[index]
        if name in kwargs:
            return kwargs[name]
        if default is _NO_DEFAULT:
            raise self.error(f"is missing its argument '{name}'")
        return default

    def kwarg(self, name: str, default=None):
        """Keyword-only argument `name` of the schema, or `default` when absent."""
        return self.call_args()[1].get(name, default)

    def verify_(self):
        slots = _count_slots(self.attributes["args"]) + _count_slots(tuple(self.attributes.get("kwargs", {}).values()))
        if slots != len(self.operands):
            raise self.error(f"has {len(self.operands)} operand(s) but its arguments have {slots} tensor place(s)")
        for r in self.results:
            if not isinstance(r.type, TensorType):
                raise self.error(f"results must be tensors, not {r.type}")
        for i, v in enumerate(self.operands):
            if not isinstance(v.type, TensorType):
                raise self.error(f"operand #{i} is {v.type}; ATen ops take tensors (a number goes in as an attribute)")
        key = answers.key_of(self)
        aten = answers.lookup(key)
        if aten is None:
            from .aten import answer  # imports torch: only a call whose answer is not kept yet pays for it

            aten = answer(self, key)
        if isinstance(aten, str):
            raise self.error(aten)
        declared = [r.type for r in self.results]
        if declared != aten:
            raise self.error(f"declares {_types(declared)}, but ATen gives {_types(aten)} for these arguments")

    def print_custom(self, p):
        args, kwargs = self.call_args()
        parts = [_format_arg(p, a) for a in args] + [f"{_key(k)} = {_format_arg(p, v)}" for k, v in kwargs.items()]
        p.write(self.name, "(", ", ".join(parts), ") : ")
        types = [r.type for r in self.results]
        p.write(p.type(types[0]) if len(types) == 1 else f"({p.types(types)})")


_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# words that lex as something else where a keyword argument's name goes: keywords, types, dimensions
_NOT_BARE = re.compile(r"(true|false|none|inf|nan|f64|f32|f16|bf16|i64|i32|i16|i8|u8|bool|index|d[0-9]+)\Z")


def _key(k: str) -> str:
    return k if _BARE_KEY.match(k) and not _NOT_BARE.match(k) else json.dumps(k, ensure_ascii=False)


def _types(ts) -> str:
    return str(ts[0]) if len(ts) == 1 else "(" + ", ".join(map(str, ts)) + ")"


def _count_slots(values) -> int:
    return sum(1 if v is UNIT else _count_slots(v) if isinstance(v, tuple) else 0 for v in values)


def _format_arg(p, a) -> str:
    if isinstance(a, Value):
        return p.value(a)
    if isinstance(a, list):
        return "[" + ", ".join(_format_arg(p, x) for x in a) + "]"
    return p.attr(a)


class ParamOp(Operation):
    """A named parameter, buffer or captured constant; its value lives in the program's param store."""

    name = "torch.param"
    operand_names = ()
    result_names = ("result",)
    attribute_types = {"sym": SymbolRef}
    num_regions = 0
    traits = frozenset({"pure"})

    def verify_(self):
        if not isinstance(self.result.type, TensorType):
            raise self.error(f"must produce a tensor, not {self.result.type}")

    def print_custom(self, p):
        p.write("torch.param ", str(self.attributes["sym"]), " : ", p.type(self.result.type))


class TorchSyntax:
    def torch_aten(self, c):
        name, rest, results = c
        operands: list[ValueRef] = []

        def lower(a):
            if isinstance(a, ValueRef):
                operands.append(a)
                return UNIT
            if isinstance(a, list):
                return tuple(lower(x) for x in a)
            return a

        positional, keyword = [], []
        for a in rest or []:
            (keyword if isinstance(a, _Kwarg) else positional).append(a)
        args = tuple(lower(a) for a in positional)
        kwargs = {}
        for kw in sorted(keyword, key=lambda k: k.key):  # operands follow the kwargs' sorted order
            if kw.key in kwargs:
                from irforge.diagnostics import error

                raise error(f"keyword argument '{kw.key}' given twice", self.loc_of(kw.tok))
            kwargs[kw.key] = lower(kw.value)
        attrs = {"args": args, **({"kwargs": DictAttr(kwargs)} if kwargs else {})}
        return OpAST(str(name), operands=operands, attrs=attrs, result_types=results)

    def torch_args(self, c):
        return list(c)

    def torch_values(self, c):
        return list(c)

    def torch_tensor(self, c):
        return self.ref(c[0])

    def torch_list(self, c):
        return c[0] or []

    def torch_kwarg(self, c):
        return _Kwarg(str(c[0]), c[1], c[0])

    def torch_quoted_kwarg(self, c):
        return _Kwarg(self.string(c[0]), c[1], c[0])

    def torch_one_result(self, c):
        return [c[0]]

    def torch_result_tuple(self, c):
        return c[0] or []

    def torch_param(self, c):
        sym, t = c
        return OpAST("torch.param", attrs={"sym": sym}, result_types=[t])


class _Kwarg:
    __slots__ = ("key", "tok", "value")

    def __init__(self, key, value, tok):
        self.key, self.value, self.tok = key, value, tok


dialect = Dialect(
    name="torch",
    summary="the captured ATen graph, one op per ATen call",
    ops=(ParamOp,),
    op_families=(AtenOp,),
    level="torch",
    grammar=grammar_file(__name__, "torch.lark"),
    syntax=TorchSyntax,
    interpreter="irforge.dialects.torch.interpreter:interpret",
)
