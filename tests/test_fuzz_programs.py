"""Fuzzing programs, not only text: what a user gets wrong in a valid program, and the edge shapes they feed it.

- torch IR with type and shape typos: the verifier holds each declaration to ATen (what it accepts, PyTorch eager
  computes with exactly the declared types), and what it accepts lowers to the tensor level with the same answer;
- size-0 dimensions: a torch program whose inputs get an empty dimension (result types as ATen infers them) lowers
  to the tile level with the same answer;
- `tune` attributes with misspelled passes and options, ill-typed or out-of-domain values: refused where they are,
  or the schedule they ask for keeps the answer.

Anything but a located `IRForgeError` (an internal error) fails. A few hundred cases in CI;
`IRFORGE_FUZZ_EXAMPLES=2000` explores more.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from irforge.dialects.torch import AtenOp, answers
from irforge.dialects.torch.aten import answer

from irforge.attributes import DictAttr
from irforge.builtin import FuncOp, ModuleOp, ReturnOp
from irforge.diagnostics import IRForgeError
from irforge.interpreter import interpret
from irforge.parser import parse_module
from irforge.pass_manager import run_pipeline
from irforge.printer import format_attr, print_module
from irforge.registry import registry
from irforge.testing import compare_outputs, output_types
from irforge.types import FunctionType, TensorType

FUZZ = int(os.environ.get("IRFORGE_FUZZ_EXAMPLES", "0"))


def fuzzing(n: int):
    return settings(
        max_examples=FUZZ or n,
        deadline=None,
        derandomize=not FUZZ,
        suppress_health_check=list(HealthCheck),
    )


_LOCATED = re.compile(r"^\S[^\n]*:\d+:\d+: error: ")
LIT = Path(__file__).parent / "lit"
TORCH_CORPUS = [
    text
    for p in sorted(LIT.rglob("*.ir"))
    if "Output" not in p.parts
    for text in [p.read_text(encoding="utf-8")]
    if "torch.aten." in text and "expected-error" not in text
]


def located(e: IRForgeError) -> None:
    """Every refusal is one message at a place in the input."""
    assert _LOCATED.match(e.render()), e.render()


def lowers_with_the_same_answer(module, pipeline: str) -> None:
    """`pipeline` runs on a copy of `module` and keeps its answer, or refuses with a located message (an op no
    decomposition takes)."""
    lowered = module.clone()
    try:
        run_pipeline(lowered, pipeline)
    except IRForgeError as e:
        located(e)
        return
    assert_same_answer(module, lowered, pipeline)


def assert_same_answer(before, after, what: str, seed: int = 0) -> None:
    """The interpreters agree on the same random inputs (drawn once, index inputs within the extents they index)."""
    from irforge.dialects.torch.interpreter import index_bounds

    from irforge.interpreter import bind_inputs, entry_function

    func = entry_function(before)
    inputs = bind_inputs(func, None, seed, index_bounds(func))
    try:
        want = interpret(before, inputs, seed=seed)
    except IRForgeError as e:  # no input is valid: an index into a dimension of size 0
        located(e)
        return
    got = interpret(after, inputs, seed=seed)
    for i, c in enumerate(compare_outputs(got, want, output_types(before))):
        assert c.ok, f"{what} changed output #{i}: {c}\n{print_module(before)}"


# ---- torch IR with typos ------------------------------------------------------------------------------------------
_TYPE = re.compile(r"\b(f32|f16|bf16|i64|i32|bool)\[([0-9,]*)\]")
_INT_ARG = re.compile(r"(?<=[(\[, ])-?\d+(?=[,)\]])")  # an integer argument or list element of a call


@st.composite
def torch_typos(draw):
    text = draw(st.sampled_from(TORCH_CORPUS))
    for _ in range(draw(st.integers(1, 2))):
        if draw(st.booleans()):
            m = draw(st.sampled_from(list(_TYPE.finditer(text))))
            dtype, dims = m.group(1), [d for d in m.group(2).split(",") if d]
            edit = draw(st.sampled_from(["dtype", "dim", "drop", "add"]))
            if edit == "dtype":
                dtype = draw(st.sampled_from(["f32", "f16", "bf16", "i64", "bool"]))
            elif edit == "dim" and dims:
                k = draw(st.integers(0, len(dims) - 1))
                dims[k] = str(draw(st.sampled_from([0, 1, 2, int(dims[k]) + 1, max(int(dims[k]) - 1, 0)])))
            elif edit == "drop" and dims:
                dims.pop(draw(st.integers(0, len(dims) - 1)))
            else:
                dims.insert(draw(st.integers(0, len(dims))), str(draw(st.integers(1, 3))))
            new = f"{dtype}[{','.join(dims)}]"
        else:
            found = [
                m for m in _INT_ARG.finditer(text) if "torch.aten" in text[text.rfind("\n", 0, m.start()) : m.start()]
            ]
            assume(found)
            m = draw(st.sampled_from(found))
            new = str(draw(st.sampled_from([-3, -1, 0, 1, 2, 3, 7])))
        text = text[: m.start()] + new + text[m.end() :]
    return text


@fuzzing(150)
@given(torch_typos())
def test_torch_typos_are_refused_where_they_are_or_lower_with_the_same_answer(text):
    try:
        module = parse_module(text, "<fuzz>")
    except IRForgeError as e:
        located(e)
        return
    # Accepted: every declaration is ATen's, so PyTorch eager (the torch interpreter) computes the declared types.
    for func in (op for op in module.body.ops if isinstance(op, FuncOp)):
        one = ModuleOp()
        one.body.append(func.clone())
        try:
            outs = interpret(one, seed=0)
        except IRForgeError as e:  # the data, not the types: an index out of range, say
            located(e)
            continue
        for out, t in zip(outs, output_types(one)):
            assert out.shape == t.shape, f"eager gives {out.shape}, declared {t}\n{print_module(one)}"
        lowers_with_the_same_answer(one, "torch-to-tensor")


# ---- size-0 dimensions --------------------------------------------------------------------------------------------
def _functions() -> list[str]:
    out = []
    for text in TORCH_CORPUS:
        for func in parse_module(text).body.ops:
            if isinstance(func, FuncOp) and func.body.args:
                one = ModuleOp()
                one.body.append(func.clone())
                out.append(print_module(one))
    return out


TORCH_FUNCTIONS = _functions()


@st.composite
def empty_dim_programs(draw):
    """A corpus function with one input dimension set to 0, every result type re-inferred by ATen's rules."""
    module = parse_module(draw(st.sampled_from(TORCH_FUNCTIONS)))
    func = module.body.ops[0]
    args = [a for a in func.body.args if isinstance(a.type, TensorType) and a.type.rank]
    assume(args)
    arg = draw(st.sampled_from(args))
    shape = list(arg.type.shape)
    shape[draw(st.integers(0, len(shape) - 1))] = 0
    arg.type = TensorType(arg.type.dtype, tuple(shape))
    for op in func.body.ops:
        if isinstance(op, AtenOp):
            types = answer(op, answers.key_of(op))
            assume(not isinstance(types, str))  # ATen refuses the call with an empty input (a view's sizes, say)
            for r, t in zip(op.results, types):
                r.type = t
    ret = func.body.ops[-1]
    assert isinstance(ret, ReturnOp)
    func.attributes["function_type"] = FunctionType(
        tuple(a.type for a in func.body.args), tuple(v.type for v in ret.operands)
    )
    assume(any(0 in v.type.shape for v in ret.operands) or any(0 in a.type.shape for a in func.body.args))
    return parse_module(print_module(module), "<fuzz>")  # as a user would write it, and verified


@fuzzing(60)
@given(empty_dim_programs())
def test_size_0_dimensions_lower_to_the_tile_level_with_the_same_answer(module):
    lowers_with_the_same_answer(module, "torch-to-tensor,tensor-to-loop,loop-to-tile")


# ---- tune attributes ---------------------------------------------------------------------------------------------
ROW_PROGRAM = """func.func @forward(%x: f32[4,64]) -> f32[4,64] {
  %y = loop.buffer f32[4,64]
  loop.kernel @k ATTRS {
    loop.for %a0 in 0..4 {
      %m = loop.reduce %r in 0..64 max(-inf) -> f32 {
        %v = loop.load %x[%a0, %r]
        loop.yield %v
      }
      loop.for %a1 in 0..64 {
        %v = loop.load %x[%a0, %a1]
        %d = scalar.sub %v, %m : f32
        loop.store %y[%a0, %a1] = %d
      }
    }
  }
  func.return %y
}
"""
# A contraction: the schedule stages its slabs in shared memory, so the shared-memory passes (tile-tma,
# tile-swizzle-smem, tile-pad-smem, tile-rasterize) have something to decide.
MATMUL_PROGRAM = """func.func @forward(%x: f32[32,64], %w: f32[64,64]) -> f32[32,64] {
  %y = loop.buffer f32[32,64]
  loop.kernel @k ATTRS {
    loop.for %a0 in 0..32 {
      loop.for %a1 in 0..64 {
        %s = loop.reduce %r in 0..64 add(0.0) -> f32 {
          %a = loop.load %x[%a0, %r]
          %b = loop.load %w[%r, %a1]
          %p = scalar.mul %a, %b : f32
          loop.yield %p
        }
        loop.store %y[%a0, %a1] = %s
      }
    }
  }
  func.return %y
}
"""
PASSES = registry().passes()
TILE_PASSES = sorted(n for n, c in PASSES.items() if c.input_level == "tile" and c.options)


def _typo(draw, word: str) -> str:
    i = draw(st.integers(0, len(word) - 1))
    return draw(st.sampled_from([word[:i] + word[i + 1 :], word[:i] + word[i] + word[i:], word.replace("-", "_")]))


@st.composite
def tune_attributes(draw):
    entries = {}
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(TILE_PASSES))
        cls = PASSES[name]
        if draw(st.integers(0, 4)) == 0:
            name = _typo(draw, name)
        opts = {}
        for _ in range(draw(st.integers(0, 3))):
            opt = draw(st.sampled_from(list(cls.options.values())))
            key = _typo(draw, opt.name) if draw(st.integers(0, 4)) == 0 else opt.name
            if opt.domain is not None and draw(st.booleans()):
                value = draw(st.sampled_from(opt.domain.values()))
            else:
                value = draw(
                    st.one_of(
                        st.integers(-2, 4096),
                        st.floats(-4, 4),
                        st.booleans(),
                        st.text(max_size=4),
                        st.lists(st.integers(0, 64), max_size=3).map(tuple),
                    )
                )
            opts[key] = value
        entries[name] = DictAttr(opts) if draw(st.integers(0, 9)) else draw(st.integers(0, 3))
    return DictAttr(entries) if draw(st.integers(0, 19)) else draw(st.sampled_from([1, "x", (1, 2)]))


@fuzzing(100)
@given(st.sampled_from([ROW_PROGRAM, MATMUL_PROGRAM]), tune_attributes())
def test_tune_attributes_are_checked_like_pipeline_options(program, tune):
    text = program.replace("ATTRS", f"attributes {{tune = {format_attr(tune)}}}")
    try:
        module = parse_module(text, "<fuzz>")
        scheduled = module.clone()
        run_pipeline(scheduled, "loop-to-tile")
    except IRForgeError as e:
        located(e)
        return
    assert_same_answer(module, scheduled, f"tune = {format_attr(tune)}")
