"""The verifier on IR built through the API (the parser refuses most of these before the verifier sees them)."""

from __future__ import annotations

import pytest

from irforge.attributes import SymbolRef
from irforge.builtin import CallOp, FuncOp, ModuleOp, ReturnOp
from irforge.diagnostics import IRForgeError
from irforge.ir import Block, Operation, Region
from irforge.location import FileLineColLoc
from irforge.registry import registry
from irforge.types import f32, i32, index
from irforge.verifier import verify, verify_or_raise


def op(name, operands=(), results=(), attrs=None, regions=(), line=None):
    cls = registry().op_class(name) or Operation
    loc = FileLineColLoc("t.ir", line, 1) if line else FileLineColLoc("t.ir", 1, 1)
    return cls(operands, results, attrs or {}, regions, loc, name=None if cls is not Operation else name)


def module_of(*ops):
    m = ModuleOp()
    for o in ops:
        m.body.append(o)
    return m


def error_of(module) -> str:
    with pytest.raises(IRForgeError) as info:
        verify(module)
    return str(info.value)


def test_valid_module_passes():
    c = op("test.constant", results=[f32], attrs={"value": 1.0})
    loop_body = Block([index])
    loop_body.append(op("test.effect", [loop_body.args[0], c.result]))
    loop_body.append(op("test.yield"))
    loop = op("test.loop", attrs={"lower": 0, "upper": 4}, regions=[Region([loop_body])])
    verify(module_of(c, loop))


# ---- dominance ---------------------------------------------------------------------------------------------------
def test_use_before_definition_in_the_same_block():
    c = op("test.constant", results=[f32], attrs={"value": 1.0})
    use = op("test.effect", [c.result])
    assert "operand #0 is used before it is defined" in error_of(module_of(use, c))


def test_op_using_its_own_result():
    p = op("test.pure", results=[f32])
    p.set_operands([p.result])
    assert "used before it is defined" in error_of(module_of(p))


def test_use_of_a_value_from_a_sibling_region():
    r1, r2 = Region([Block()]), Region([Block()])
    c = op("test.constant", results=[f32], attrs={"value": 1.0})
    r1.blocks[0].append(c)
    r2.blocks[0].append(op("test.effect", [c.result]))
    assert "not defined in an enclosing scope" in error_of(module_of(op("x.two", regions=[r1, r2])))


def test_use_from_an_enclosing_block_is_fine():
    c = op("test.constant", results=[f32], attrs={"value": 1.0})
    inner = Region([Block()])
    inner.blocks[0].append(op("test.effect", [c.result]))
    verify(module_of(c, op("x.wrap", regions=[inner])))


def test_use_of_a_value_defined_after_the_enclosing_op():
    inner = Region([Block()])
    wrap = op("x.wrap", regions=[inner])
    c = op("test.constant", results=[f32], attrs={"value": 1.0})
    inner.blocks[0].append(op("test.effect", [c.result]))
    assert "used before it is defined" in error_of(module_of(wrap, c))


def test_use_of_a_detached_value():
    c = op("test.constant", results=[f32], attrs={"value": 1.0})  # never inserted anywhere
    assert "not defined in an enclosing scope" in error_of(module_of(op("test.effect", [c.result])))


# ---- isolation, terminators, regions -------------------------------------------------------------------------
def test_isolated_from_above():
    c = op("test.constant", results=[f32], attrs={"value": 1.0})
    f = FuncOp.build("f", [], [])
    f.body.append(op("test.effect", [c.result]))
    f.body.append(ReturnOp())
    assert "defined outside 'func.func', which is isolated from above" in error_of(module_of(c, f))


def test_isolation_is_checked_through_nested_regions():
    c = op("test.constant", results=[f32], attrs={"value": 1.0})
    f = FuncOp.build("f", [], [])
    inner = Region([Block()])
    inner.blocks[0].append(op("test.effect", [c.result]))
    f.body.append(op("x.wrap", regions=[inner]))
    f.body.append(ReturnOp())
    assert "isolated from above" in error_of(module_of(c, f))


def test_terminator_must_be_last():
    f = FuncOp.build("f", [], [])
    f.body.append(ReturnOp())
    f.body.append(op("test.effect"))
    assert "'func.return' op must be the last op of its block" in error_of(module_of(f))


def test_function_must_end_with_return_of_its_types():
    f = FuncOp.build("f", [f32], [i32])
    f.body.append(ReturnOp([f.args[0]]))
    assert "returns (f32) but the function's type is (f32) -> i32" in error_of(module_of(f))
    g = FuncOp.build("g", [], [])
    assert "must end with func.return" in error_of(module_of(g))


def test_region_count_and_single_block():
    assert "expects 1 region(s), got 0" in error_of(module_of(op("test.loop", attrs={"lower": 0, "upper": 1})))
    two = Region([Block([index]), Block()])
    loop = op("test.loop", attrs={"lower": 0, "upper": 1}, regions=[two])
    assert "expects a single block in each region, got 2" in error_of(module_of(loop))


# ---- symbols -------------------------------------------------------------------------------------------------
def test_duplicate_symbol_names_both():
    f1, f2 = FuncOp.build("f", [], []), FuncOp.build("f", [], [])
    for f, line in ((f1, 1), (f2, 5)):
        f.body.append(ReturnOp())
        f.loc = FileLineColLoc("t.ir", line, 1)
    with pytest.raises(IRForgeError) as info:
        verify(module_of(f1, f2))
    d = info.value.diagnostics[0]
    assert "redefines symbol '@f'" in d.message and d.loc.line == 5
    assert [n.message for n in d.notes] == ["first defined here"] and d.notes[0].loc.line == 1


def test_symbols_in_different_tables_may_repeat():
    a, b = FuncOp.build("f", [], []), FuncOp.build("f", [], [])
    a.body.append(ReturnOp())
    b.body.append(ReturnOp())
    inner = ModuleOp()
    inner.body.append(a)
    verify(module_of(inner, b))


# ---- attributes and arity --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({}, "requires attribute 'lower'"),
        ({"lower": 0}, "requires attribute 'upper'"),
        ({"lower": "0", "upper": 1}, "attribute 'lower' must be int, got \"0\""),
        ({"lower": True, "upper": 1}, "attribute 'lower' must be int, got true"),  # bool is not an int here
        ({"lower": 0.0, "upper": 1}, "attribute 'lower' must be int, got 0.0"),
        ({"lower": 2, "upper": 1}, "lower bound above its upper bound"),
    ],
)
def test_attribute_types(attrs, message):
    loop = op("test.loop", attrs=attrs, regions=[Region([Block([index])])])
    assert message in error_of(module_of(loop))


def test_attribute_alternatives():
    for value in (1, 1.5, False):
        verify(module_of(op("test.constant", results=[f32], attrs={"value": value})))
    assert "must be int or float or bool, got [1]" in error_of(
        module_of(op("test.constant", results=[f32], attrs={"value": (1,)}))
    )


def test_arity():
    def const():
        return op("test.constant", results=[f32], attrs={"value": 1.0})

    assert "expects 1 result(s), got 0" in error_of(module_of(op("test.pure")))
    assert "expects 1 result(s), got 2" in error_of(module_of(op("test.pure", results=[f32, f32])))
    c = const()
    assert "expects 0 operand(s), got 1" in error_of(module_of(c, op("test.yield", [c.result])))
    c = const()
    verify(module_of(c, op("test.pure", [c.result] * 5, [f32])))  # a variadic group takes any number
    call = CallOp([], [], {"callee": "f"})  # callee must be a symbol reference, not a string
    assert "attribute 'callee' must be SymbolRef" in error_of(module_of(call))
    verify(module_of(CallOp([], [], {"callee": SymbolRef("f")})))


def test_verify_or_raise_names_the_context():
    bad = op("test.loop", attrs={"lower": 2, "upper": 1}, regions=[Region([Block([index])])])
    with pytest.raises(IRForgeError, match=r"upper bound \(after pass 'x'\)"):
        verify_or_raise(module_of(bad), "after pass 'x'")
