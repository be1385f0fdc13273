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
    again = parse_module(text, verify=False)  # the syntax of any call; whether ATen takes it is the verifier's
    assert print_module(again) == text
    assert structurally_equal(again, module)
    assert structurally_equal(parse_module(print_module(module, generic=True), verify=False), module)


def test_call_args_put_operands_in_place():
    m = parse_module(
        "func.func @f(%a: f32[2], %b: f32[2]) -> f32[4] {\n"
        "  %c = torch.aten.cat([%a, %b], 0, flag = %a) : f32[4]\n  func.return %c\n}\n",
        verify=False,  # `flag` is no argument of aten.cat: this is about where operands go, not what ATen takes
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


# ---- the verifier holds each call to ATen's rules (the installed PyTorch's schemas and meta functions) ----------
def _call(line: str, args: str = "%x: f32[4,64]") -> str:
    return f"func.func @f({args}) {{\n  {line}\n  func.return\n}}\n"


@pytest.mark.parametrize(
    ("line", "args", "message"),
    [
        ("%y = torch.aten.mul.Tensor(%x, 2) : f16[4,64]", None, "declares f16[4,64], but ATen gives f32[4,64]"),
        ("%y = torch.aten.mul.Tensor(%x, 2) : f32[64,4]", None, "declares f32[64,4], but ATen gives f32[4,64]"),
        ("%y = torch.aten.mul.Tensor(%x, 2.5) : i64[4,64]", "%x: i64[4,64]", "but ATen gives f32[4,64]"),
        ("%y = torch.aten.add.Tensor(%x, %z) : f32[4,64]", "%x: f32[4,64], %z: f32[3]", "is not a valid ATen call"),
        ("%y = torch.aten.sum.dim_IntList(%x, [5]) : f32[4]", None, "is not a valid ATen call"),
        ("%y = torch.aten.softmax.int(%x, -1) : i64[4,64]", "%x: i64[4,64]", "has no ATen kernel for these dtypes"),
        ("%y = torch.aten.where.self(%c, %x, 0.0) : f32[4,64]", "%c: bool[4,64], %x: f32[4,64]", "argument 'other'"),
        ("%y = torch.aten.exp(%x, 1) : f32[4,64]", None, "is not a valid ATen call"),
        ("%y = torch.aten.exp(bogus = 1) : f32[4,64]", None, "is not a valid ATen call"),
        ("%y = torch.aten.exp(%s) : f32[4,64]", "%s: f32", "operand #0 is f32; ATen ops take tensors"),
        ("%y = torch.aten.no_such_op(%x) : f32[4,64]", None, "is not an ATen op PyTorch"),
        ("%y = torch.aten.exp.NoSuchOverload(%x) : f32[4,64]", None, "is not an ATen op PyTorch"),
        ("%v, %i = torch.aten.max.dim(%x, 1) : (f32[4], f32[4])", None, "declares (f32[4], f32[4]), but ATen gives"),
        ("%y = torch.aten.nonzero(%x) : i64[4,2]", None, "depends on the data"),
    ],
    ids=[
        "dtype",
        "shape",
        "promotion",
        "broadcast",
        "dim-out-of-range",
        "no-kernel-for-dtype",
        "float-for-tensor",
        "too-many-arguments",
        "unknown-keyword",
        "scalar-operand",
        "unknown-op",
        "unknown-overload",
        "second-result",
        "data-dependent",
    ],
)
def test_verifier_refuses_what_aten_refuses(line, args, message):
    text = _call(line, args or "%x: f32[4,64]")
    with pytest.raises(IRForgeError) as info:
        parse_module(text, "t.ir")
    assert message in str(info.value)
    loc = info.value.loc
    assert (loc.file, loc.line, loc.col) == ("t.ir", 2, 3)  # at the op


@pytest.mark.parametrize(
    "line",
    [
        "%y = torch.aten.mul.Tensor(%x, 2) : f32[4,64]",
        "%y = torch.aten.softmax.int(%x, -1, f16) : f16[4,64]",
        "%y = torch.aten.sum.dim_IntList(%x, [1], true) : f32[4,1]",
        "%v, %i = torch.aten.max.dim(%x, 1) : (f32[4], i64[4])",
        "%y = torch.aten.scaled_dot_product_attention(%x, %x, %x, none, 0.0, false, scale = 0.5) : f32[4,64]",
        "%y = torch.aten.where.ScalarOther(%x, %x, 0.0) : f32[4,64]",
        "%y = torch.aten.cat([%x, %x], 0) : f32[8,64]",
        "%y = torch.aten.view(%x, [256]) : f32[256]",
    ],
)
def test_verifier_accepts_what_aten_accepts(line):
    parse_module(_call(line.replace("where.ScalarOther(%x", "where.ScalarOther(%c"), "%c: bool[4,64], %x: f32[4,64]"))


def test_kept_answers_verify_without_pytorch(tmp_path):
    """A process verifies torch-level IR from the answers an earlier one kept (`answers.py`), refusals included,
    without importing PyTorch: the second run below cannot import it."""
    import os
    import subprocess
    import sys

    good = _call("%y = torch.aten.mul.Tensor(%x, 2) : f32[4,64]", "%x: f32[4,64]")
    bad = _call("%y = torch.aten.add.Tensor(%x, %z) : f32[4,64]", "%x: f32[4,64], %z: f32[3]")
    (tmp_path / "good.ir").write_text(good)
    (tmp_path / "bad.ir").write_text(bad)
    run = (
        "import sys\n"
        "if sys.argv[1] == 'blocked': sys.modules['torch'] = None  # any import of torch now fails\n"
        "from irforge.diagnostics import IRForgeError\n"
        "from irforge.parser import parse_module, read_source\n"
        "for name in ('good.ir', 'bad.ir'):\n"
        "    try:\n"
        "        parse_module(read_source(name), name)\n"
        "        print(name, 'ok')\n"
        "    except IRForgeError as e:\n"
        "        print(name, str(e).splitlines()[0])\n"
    )
    env = {**os.environ, "IRFORGE_CACHE_DIR": str(tmp_path / "cache")}
    outs = []
    for mode in ("asks", "blocked"):
        p = subprocess.run([sys.executable, "-c", run, mode], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        outs.append(p.stdout)
    assert outs[0] == outs[1]
    assert "good.ir ok" in outs[0] and "bad.ir:2:3: 'torch.aten.add.Tensor' op is not a valid ATen call" in outs[0]
    assert list((tmp_path / "cache" / "aten").glob("torch-*.pickle"))


def test_kept_answers_merge_with_other_processes_and_start_over_past_the_cap(tmp_path, monkeypatch):
    import pickle

    from irforge.dialects.torch import answers

    monkeypatch.setenv("IRFORGE_CACHE_DIR", str(tmp_path))
    path = answers._path()
    path.parent.mkdir(parents=True)
    path.write_bytes(pickle.dumps({"theirs": "answer"}))  # what another process kept meanwhile
    monkeypatch.setattr(answers, "_NEW", {"ours": []})
    answers._save()
    assert pickle.loads(path.read_bytes()) == {"theirs": "answer", "ours": []}
    monkeypatch.setattr(answers, "MAX_KEPT", 1)
    answers._save()
    assert pickle.loads(path.read_bytes()) == {"ours": []}
