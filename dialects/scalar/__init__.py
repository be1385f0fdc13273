"""The `scalar` dialect: SSA math on scalars, one op per entry of `irforge.scalar_ops.SCALAR_OPS`.

Level-neutral (like MLIR's `arith`), so the loop, tile and kernel levels share it:

    %c = scalar.const 1e-06 : f32
    %s = scalar.add %a, %c : f32          // any table entry: scalar.<name> operands : result type
    %m = scalar.lt %i, %j : bool
    %h = scalar.cast %x : f32 -> bf16     // conversion; float to integer truncates

Each op's meaning (arity, result type, numpy semantics, CUDA spelling) is its table entry, so adding an entry to the
table adds the op here. Half types compute in f32 and round to the result type after every op, as PyTorch does.
"""

from __future__ import annotations

import re
from typing import ClassVar

from irforge.dialect import Dialect
from irforge.ir import Operation
from irforge.parser import OpAST
from irforge.scalar_ops import SCALAR_OPS
from irforge.types import ScalarType

_OPERAND_NAMES = {1: ("operand",), 2: ("lhs", "rhs"), 3: ("condition", "if_true", "if_false")}


class ScalarMathOp(Operation):
    """Base class of `scalar.<name>`: the table entry `fn` applied to scalar operands."""

    fn: ClassVar[str] = ""
    result_names = ("result",)
    num_regions = 0
    traits = frozenset({"pure"})

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        return [SCALAR_OPS[cls.fn].result_type(list(operand_types))]

    def verify_(self):
        for v in self.operands:
            if not isinstance(v.type, ScalarType):
                raise self.error(f"takes scalars, got {v.type}")
        try:
            expected = SCALAR_OPS[self.fn].result_type([v.type for v in self.operands])
        except ValueError as e:
            raise self.error(str(e)) from None
        if self.result.type != expected:
            raise self.error(f"result must be {expected}, not {self.result.type}")

    def print_custom(self, p):
        if self.attributes:
            return p.print_generic(self)
        p.write(self.name, " ", p.values(self.operands), " : ", p.type(self.result.type))


def _math_op_class(name: str) -> type[ScalarMathOp]:
    entry = SCALAR_OPS[name]
    return type(
        "".join(w.title() for w in name.split("_")) + "Op",
        (ScalarMathOp,),
        {
            "__doc__": f"{entry.summary} (scalar op table entry '{name}').",
            "__module__": __name__,
            "name": f"scalar.{name}",
            "fn": name,
            "operand_names": _OPERAND_NAMES[entry.arity],
        },
    )


MATH_OPS = tuple(_math_op_class(n) for n, o in SCALAR_OPS.items() if o.kind != "cast")
MATH_OP_BY_FN = {cls.fn: cls for cls in MATH_OPS}


class ConstOp(Operation):
    """A scalar constant: float values for float types, integers for integer types, true/false for bool."""

    name = "scalar.const"
    operand_names = ()
    result_names = ("result",)
    attribute_types = {"value": (int, float, bool)}
    num_regions = 0
    traits = frozenset({"pure"})

    @staticmethod
    def build(value, dtype: ScalarType, loc=None) -> ConstOp:
        from irforge.location import UNKNOWN

        return ConstOp([], [dtype], {"value": dtype.as_python(value)}, loc=loc or UNKNOWN)

    def verify_(self):
        t, v = self.result.type, self.attributes["value"]
        if not isinstance(t, ScalarType):
            raise self.error(f"makes scalars, not {t}")
        want = bool if t.name == "bool" else float if t.is_float else int
        if type(v) is not want:
            example = {bool: "true", float: "1.0", int: "1"}[want]
            raise self.error(f"a {t} constant needs a {want.__name__} value like {example}")

    def print_custom(self, p):
        if set(self.attributes) != {"value"}:
            return p.print_generic(self)
        p.write("scalar.const ", p.attr(self.attributes["value"]), " : ", p.type(self.result.type))


class CastOp(Operation):
    """Convert a scalar to another scalar type (round to nearest even; float to integer truncates toward zero)."""

    name = "scalar.cast"
    fn = "cast"
    operand_names = ("operand",)
    result_names = ("result",)
    num_regions = 0
    traits = frozenset({"pure"})

    def verify_(self):
        for t in (self.operand.type, self.result.type):
            if not isinstance(t, ScalarType):
                raise self.error(f"converts scalars, got {t}")

    def print_custom(self, p):
        if self.attributes:
            return p.print_generic(self)
        p.write("scalar.cast ", p.value(self.operand), " : ", p.type(self.operand.type), " -> ")
        p.write(p.type(self.result.type))


class ScalarSyntax:
    def scalar_math(self, c):
        name_tok, uses, t = c
        return OpAST(str(name_tok), operands=uses, result_types=[t], loc=self.loc_of(name_tok))

    def scalar_const(self, c):
        value, t = c
        return OpAST("scalar.const", attrs={"value": value}, result_types=[t])

    def scalar_cast(self, c):
        v, src, dst = c
        return OpAST("scalar.cast", operands=[v], operand_types=[src], result_types=[dst])


def _grammar() -> str:
    names = sorted((cls.fn for cls in MATH_OPS), key=len, reverse=True)
    alternatives = "|".join(re.escape(n) for n in names)
    return f"""// The scalar dialect: `scalar.<table entry> operands : type`, constants and casts.
%extend custom_op: scalar_math | scalar_const | scalar_cast

scalar_math: SCALAR_MATH_OP value_uses ":" type
scalar_const: "scalar.const" attr ":" type
scalar_cast: "scalar.cast" value_use ":" type "->" type
SCALAR_MATH_OP: /scalar\\.({alternatives})(?![A-Za-z0-9_$.\\-])/
"""


dialect = Dialect(
    name="scalar",
    summary="scalar SSA math: one op per entry of the scalar op table, constants, casts",
    ops=(*MATH_OPS, ConstOp, CastOp),
    grammar=_grammar(),
    syntax=ScalarSyntax,
)
