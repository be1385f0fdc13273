"""The `test` dialect: small ops for testing the framework itself (parser, printer, passes, instrumentation).

%c = test.constant 2.5 : f32
%s = test.pure %a, %c {tag = "x"} : f32
test.loop %i in 0..16 {
  test.effect %i
  test.yield
}
"""

from __future__ import annotations

from irforge.dialect import Dialect, grammar_file
from irforge.ir import Operation
from irforge.parser import OpAST
from irforge.types import index


class TestOp(Operation):
    """Any operands, results, attributes and regions; generic syntax only."""

    name = "test.op"


class PureOp(Operation):
    """A side-effect-free op (CSE and DCE may remove it)."""

    name = "test.pure"
    operand_names = ("*inputs",)
    result_names = ("result",)
    num_regions = 0
    traits = frozenset({"pure"})

    def print_custom(self, p):
        p.write("test.pure")
        if self.operands:
            p.write(" ", p.values(self.operands))
        p.attr_dict(self.attributes)
        p.write(" : ", p.type(self.result.type))


class ConstantOp(Operation):
    """A scalar constant."""

    name = "test.constant"
    operand_names = ()
    result_names = ("result",)
    attribute_types = {"value": (int, float, bool)}
    num_regions = 0
    traits = frozenset({"pure"})

    def print_custom(self, p):
        p.write("test.constant ", p.attr(self.attributes["value"]), " : ", p.type(self.result.type))


class EffectOp(Operation):
    """An op with side effects: never removed."""

    name = "test.effect"
    operand_names = ("*inputs",)
    result_names = ()
    num_regions = 0

    def print_custom(self, p):
        p.write("test.effect")
        if self.operands:
            p.write(" ", p.values(self.operands))
        p.attr_dict(self.attributes)


class LoopOp(Operation):
    """A counted loop whose induction variable is declared in the header."""

    name = "test.loop"
    operand_names = ()
    result_names = ()
    attribute_types = {"lower": int, "upper": int}
    num_regions = 1
    traits = frozenset({"single_block"})
    anchor_aliases = ("loop",)

    def verify_(self):
        if self.attributes["lower"] > self.attributes["upper"]:
            raise self.error("has a lower bound above its upper bound")
        args = self.body.args
        if len(args) != 1 or args[0].type != index:
            raise self.error("needs one index block argument")

    def print_custom(self, p):
        a = self.attributes
        with p.scope():  # the induction variable belongs to the region, as in the generic form
            p.write("test.loop ", p.define(self.body.args[0]), f" in {a['lower']}..{a['upper']}")
            p.attr_dict(a, elide=("lower", "upper"), prefix=" attributes ")
            p.write(" ")
            p.region(self.regions[0], print_entry_args=False)


class YieldOp(Operation):
    """Ends a test.loop body."""

    name = "test.yield"
    operand_names = ()
    result_names = ()
    traits = frozenset({"terminator"})

    def print_custom(self, p):
        p.write("test.yield")


class TestSyntax:
    def test_pure(self, c):
        uses, attrs, t = c
        return OpAST("test.pure", operands=uses or [], attrs=dict(attrs or {}), result_types=[t])

    def test_constant(self, c):
        value, t = c
        return OpAST("test.constant", attrs={"value": value}, result_types=[t])

    def test_effect(self, c):
        uses, attrs = c
        return OpAST("test.effect", operands=uses or [], attrs=dict(attrs or {}), result_types=[])

    def test_loop(self, c):
        iv, lo, hi, attrs, region = c
        a = {**dict(attrs or {}), "lower": self.integer(lo), "upper": self.integer(hi)}
        return OpAST("test.loop", attrs=a, result_types=[], regions=[region.with_entry_args([(self.ref(iv), index)])])

    def test_yield(self, c):
        return OpAST("test.yield", result_types=[])


dialect = Dialect(
    name="test",
    summary="ops for testing the framework itself",
    ops=(TestOp, PureOp, ConstantOp, EffectOp, LoopOp, YieldOp),
    grammar=grammar_file("irforge_test", "test.lark"),
    syntax=TestSyntax,
)
