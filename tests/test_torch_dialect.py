"""The torch dialect's syntax: any ATen call (tensors, numbers, none, strings, lists, dtypes, keywords) prints and
parses back, in the custom and the generic form (hypothesis over generated calls)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from irforge.dialects.torch import AtenOp

from irforge.attributes import UNIT, DictAttr
from irforge.builtin import FuncOp, ModuleOp, ReturnOp
from irforge.diagnostics import IRForgeError
from irforge.hashing import structurally_equal
from irforge.parser import parse_module
from irforge.printer import print_module
from irforge.types import ScalarType, TensorType

SCALARS = st.one_of(
    st.integers(-(2**62), 2**62),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.booleans(),
    st.none(),
    st.text(max_size=6),
    st.sampled_from([ScalarType(n) for n in ("f32", "f16", "bf16", "i64", "bool")]),
)
# UNIT marks an operand's place; lists may hold tensors and values
ARGS = st.recursive(st.one_of(SCALARS, st.just(UNIT)), lambda sub: st.lists(sub, max_size=3).map(tuple), max_leaves=6)
NAMES = st.from_regex(r"torch\.aten\.[a-z_][a-z0-9_]{0,8}(\.[A-Za-z_][A-Za-z0-9_]{0,6})?", fullmatch=True)
# keyword names, including ones that lex as something else unless quoted (types, d0, true, ...), and odd text
KEYS = st.one_of(
    st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True),
    st.sampled_from(["f32", "index", "d0", "true", "none", "dim", "min", "loc", "unit"]),
    st.text(min_size=1, max_size=4),
)


def slots(v) -> int:
    return 1 if v is UNIT else sum(slots(x) for x in v) if isinstance(v, tuple) else 0


@settings(max_examples=150, deadline=None)
@given(NAMES, st.lists(ARGS, max_size=4).map(tuple), st.dictionaries(KEYS, ARGS, max_size=3), st.integers(1, 2))
def test_any_aten_call_round_trips(name, args, kwargs, nresults):
    n = slots(args) + slots(tuple(kwargs.values()))
    t = TensorType(ScalarType("f32"), (2, 3))
    func = FuncOp.build("forward", [t], [t])
    x = func.body.args[0]
    attrs = {"args": args, **({"kwargs": DictAttr(kwargs)} if kwargs else {})}
    op = AtenOp([x] * n, [t] * nresults, attrs, name=name)
    func.body.append(op)
    func.body.append(ReturnOp([op.results[0]]))
    module = ModuleOp()
    module.body.append(func)
    text = print_module(module)
    again = parse_module(text)
    assert print_module(again) == text
    assert structurally_equal(again, module)
    assert structurally_equal(parse_module(print_module(module, generic=True)), module)


def test_call_args_put_operands_in_place():
    m = parse_module(
        "func.func @f(%a: f32[2], %b: f32[2]) -> f32[4] {\n"
        "  %c = torch.aten.cat([%a, %b], 0, flag = %a) : f32[4]\n  func.return %c\n}\n"
    )
    op = m.body.ops[0].body.ops[0]
    a, b = m.body.ops[0].body.args
    args, kwargs = op.call_args()
    assert args == [[a, b], 0] and kwargs == {"flag": a}
    assert op.arg(1, "dim") == 0 and op.arg(5, "missing", "default") == "default"
    assert op.aten_name == "aten.cat" and op.packet == "aten.cat"


def test_results_must_be_tensors():
    with pytest.raises(IRForgeError, match="results must be tensors, not f32"):
        parse_module(
            "func.func @f(%a: f32[2]) {\n"
            '  %c = "torch.aten.sum"(%a) {args = [unit]} : (f32[2]) -> f32\n'
            "  func.return\n}\n"
        )
