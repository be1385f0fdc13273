"""Property tests of the textual IR: print -> parse -> print is the identity on printed text, and parse -> print ->
parse gives a structurally equal module, for the custom and the generic form, with and without locations."""

from __future__ import annotations

import math
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ir_strategies import affine_maps, attributes, modules, types

from irforge.attributes import attr_key
from irforge.hashing import structural_hash, structurally_equal
from irforge.parser import parse_module
from irforge.printer import print_module
from irforge.verifier import verify

# Deterministic in CI; IRFORGE_FUZZ_EXAMPLES=5000 explores more (and differently: the seed then varies).
FUZZ = int(os.environ.get("IRFORGE_FUZZ_EXAMPLES", "0"))
PROPERTY = settings(
    max_examples=FUZZ or 100,
    deadline=None,
    derandomize=not FUZZ,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def roundtrip(module, **print_options):
    text = print_module(module, **print_options)
    again = parse_module(text, "<roundtrip>", allow_unregistered=True)
    assert structurally_equal(module, again), text
    assert structural_hash(module) == structural_hash(again)
    assert print_module(again, **print_options) == text
    return again


@PROPERTY
@given(modules())
def test_custom_form_roundtrips(module):
    verify(module)
    roundtrip(module)


@PROPERTY
@given(modules())
def test_generic_form_roundtrips(module):
    again = roundtrip(module, generic=True)
    # Read back from the generic form, the module prints in custom syntax exactly as the original does.
    assert print_module(again) == print_module(module)


@PROPERTY
@given(modules(max_depth=2, with_locs=True))
def test_locations_roundtrip(module):
    again = roundtrip(module, debuginfo=True)
    assert [str(op.loc) for op in again.walk()] == [str(op.loc) for op in module.walk()]


def _attr_module(value):
    from irforge.builtin import ModuleOp
    from irforge.ir import Operation

    module = ModuleOp()
    module.body.append(Operation(attributes={"a": value}, name="t.attr"))
    return module


@settings(PROPERTY, max_examples=FUZZ or 300)
@given(attributes())
def test_attributes_roundtrip_by_kind(value):
    # attr_key tells apart what Python's == conflates (True/1, 0.0/-0.0) and equates nan with nan.
    again = roundtrip(_attr_module(value))
    assert attr_key(again.body.ops[0].attributes["a"]) == attr_key(value)


@settings(PROPERTY, max_examples=FUZZ or 200)
@given(types())
def test_types_roundtrip(t):
    from irforge.builtin import ModuleOp
    from irforge.ir import Operation

    module = ModuleOp()
    module.body.append(Operation(result_types=[t], name="t.value"))
    again = roundtrip(module)
    assert again.body.ops[0].results[0].type == t


@settings(PROPERTY, max_examples=FUZZ or 200)
@given(affine_maps(), st.data())
def test_affine_maps_print_and_evaluate_the_same(m, data):
    again = roundtrip(_attr_module(m)).body.ops[0].attributes["a"]
    assert again == m  # exactly the tree that was printed, parenthesised where precedence needs it
    coords = data.draw(st.lists(st.integers(-50, 50), min_size=m.num_dims, max_size=m.num_dims))
    try:
        expected = m.evaluate(coords)
    except ZeroDivisionError:
        return
    assert again.evaluate(coords) == expected


def test_special_floats_keep_their_bits():
    values = [0.0, -0.0, 5e-324, 1e308, float("inf"), float("-inf"), 0.1, 1 / 3]
    module = parse_module(print_module(_attr_module(tuple(values))), allow_unregistered=True)
    got = module.body.ops[0].attributes["a"]
    assert [v.hex() for v in got] == [v.hex() for v in values]
    nan = parse_module('"t.a"() {x = nan} : () -> ()', allow_unregistered=True).body.ops[0].attributes["x"]
    assert math.isnan(nan)
