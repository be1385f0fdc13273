"""The level-neutral core ops: `builtin.module` and the `func` dialect (functions, calls, returns).

func.func @forward(%x: f32[1,32,2048], %w: f32[2048]) -> f32[1,32,2048] {
  ...
  func.return %y
}
"""

from __future__ import annotations

from .attributes import SymbolRef
from .dialect import Dialect, grammar_file
from .ir import Block, Operation, Region
from .parser import OpAST, RegionAST
from .types import FunctionType


class ModuleOp(Operation):
    """The top-level container; printed as its contents unless it carries attributes."""

    name = "builtin.module"
    operand_names = ()
    result_names = ()
    num_regions = 1
    traits = frozenset({"isolated", "symbol_table", "no_terminator", "single_block"})
    anchor_aliases = ("module",)

    def __init__(self, operands=(), result_types=(), attributes=None, regions=(), loc=None, **kw):
        from .location import UNKNOWN

        super().__init__(operands, result_types, attributes, regions or [Region([Block()])], loc or UNKNOWN, **kw)

    def print_custom(self, p):
        p.write("module")
        if self.attributes:
            p.attr_dict(self.attributes, prefix=" attributes ")
        p.write(" ")
        p.region(self.regions[0])


class FuncOp(Operation):
    """A function: named, isolated from above, its entry block's arguments are the inputs.

    A function may update **state**, memory that outlives a call (a KV cache): `attributes {state = ["a", "b"]}`
    makes its last two arguments the states' values on entry and its last two results their values on exit. The
    function itself stays pure; whoever runs it keeps each state in one buffer, passed in and updated in place
    (docs/design.md, "Program state").
    """

    name = "func.func"
    operand_names = ()
    result_names = ()
    attribute_types = {"sym_name": str, "function_type": FunctionType}
    num_regions = 1
    traits = frozenset({"isolated", "symbol", "single_block"})
    anchor_aliases = ("func",)

    @staticmethod
    def build(name: str, input_types, output_types, arg_hints=None, attributes=None, loc=None) -> FuncOp:
        from .location import UNKNOWN

        region = Region([Block(input_types, arg_hints)])
        attrs = {"sym_name": name, "function_type": FunctionType(tuple(input_types), tuple(output_types))}
        return FuncOp((), (), {**(attributes or {}), **attrs}, [region], loc or UNKNOWN)

    @property
    def args(self):
        return self.body.args

    def state_names(self) -> tuple[str, ...]:
        """The names of the state the function updates (its `state` attribute; none when absent)."""
        return tuple(self.attributes.get("state", ()))

    def state_pairs(self) -> list[tuple[str, object, int]]:
        """(name, argument, result position) per state: the function's last k arguments are the states' values on
        entry and its last k results their values on exit, in the order `state` names them (k = len(state))."""
        names = self.state_names()
        if not names:
            return []
        args, n_out = self.body.args, len(self.attributes["function_type"].outputs)
        k = len(names)
        return [(name, args[len(args) - k + i], n_out - k + i) for i, name in enumerate(names)]

    def verify_(self):
        ft = self.attributes["function_type"]
        args = self.body.args
        if tuple(a.type for a in args) != ft.inputs:
            raise self.error(f"arguments {[str(a.type) for a in args]} do not match its type {ft}")
        ret = self.body.ops[-1] if self.body.ops else None
        if not isinstance(ret, ReturnOp):
            raise self.error("must end with func.return")
        got = tuple(v.type for v in ret.operands)
        if got != ft.outputs:
            raise ret.error(f"returns ({', '.join(map(str, got))}) but the function's type is {ft}")
        self._verify_state(ft)

    def _verify_state(self, ft) -> None:
        names = self.attributes.get("state", ())
        if not isinstance(names, tuple) or not all(isinstance(n, str) for n in names):
            raise self.error("'state' must be a list of state names (strings)")
        if len(set(names)) != len(names):
            raise self.error("'state' names a state twice")
        if len(names) > min(len(ft.inputs), len(ft.outputs)):
            raise self.error(
                f"has {len(names)} state(s) but only {len(ft.inputs)} argument(s), {len(ft.outputs)} result(s)"
            )
        for name, arg, res in self.state_pairs():
            if arg.type != ft.outputs[res]:
                raise self.error(f"state '{name}' enters as {arg.type} but leaves as {ft.outputs[res]}")

    def print_custom(self, p):
        ft = self.attributes["function_type"]
        p.write("func.func ", str(SymbolRef(self.attributes["sym_name"])), "(")
        p.write(", ".join(f"{p.define(a)}: {a.type}" for a in self.body.args), ")")
        if ft.outputs:
            outs = ft.outputs
            p.write(" -> ", str(outs[0]) if len(outs) == 1 else f"({p.types(outs)})")
        p.attr_dict(self.attributes, elide=("sym_name", "function_type"), prefix=" attributes ")
        p.write(" ")
        p.region(self.regions[0], print_entry_args=False)


class ReturnOp(Operation):
    """Return values from a function."""

    name = "func.return"
    operand_names = ("*values",)
    result_names = ()
    num_regions = 0
    traits = frozenset({"terminator"})

    def verify_(self):
        if not isinstance(self.parent_op, FuncOp):
            raise self.error("must be inside func.func")

    def print_custom(self, p):
        p.write("func.return")
        if self.operands:
            p.write(" ", p.values(self.operands))
        p.attr_dict(self.attributes)


class CallOp(Operation):
    """Call a function of the module by symbol."""

    name = "func.call"
    operand_names = ("*args",)
    attribute_types = {"callee": SymbolRef}
    num_regions = 0

    def print_custom(self, p):
        p.write("func.call ", str(self.attributes["callee"]), "(", p.values(self.operands), ") : ")
        from .printer import format_function_type

        p.write(format_function_type([v.type for v in self.operands], [r.type for r in self.results]))


class BuiltinSyntax:
    def builtin_module(self, c):
        attrs, region = c
        return OpAST("builtin.module", attrs=dict(attrs) if attrs else {}, result_types=[], regions=[region])

    def func_func(self, c):
        sym, *rest = c
        args = [a for a in rest if isinstance(a, tuple)]
        results, attrs, region = rest[len(args) :]
        ft = FunctionType(tuple(t for _, t in args), tuple(results or ()))
        extra = dict(attrs) if attrs else {}
        return OpAST(
            "func.func",
            attrs={**extra, "sym_name": sym.name, "function_type": ft},
            result_types=[],
            regions=[RegionAST.with_entry_args(region, args)],
        )

    def func_arg(self, c):
        return (self.ref(c[0]), c[1])

    def func_one_result(self, c):
        return [c[0]]

    def func_result_tuple(self, c):
        return c[0] or []

    def func_return(self, c):
        return OpAST("func.return", operands=c[0] or [], result_types=[])

    def func_call(self, c):
        sym, uses, (ins, outs) = c
        return OpAST("func.call", operands=uses or [], attrs={"callee": sym}, result_types=outs, operand_types=ins)


dialect = Dialect(
    name="builtin",
    summary="modules",
    ops=(ModuleOp,),
    grammar=grammar_file(__package__, "builtin.lark"),
    syntax=BuiltinSyntax,
)
func_dialect = Dialect(name="func", summary="functions, calls and returns", ops=(FuncOp, ReturnOp, CallOp))
