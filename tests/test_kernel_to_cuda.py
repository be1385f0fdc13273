"""The kernel -> cuda emitter: every kernel compiles with NVRTC for sm_90a (no GPU needed), the output is readable
and faithful (names, origins, literals, launch configuration), and the prelude covers the scalar op table."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from irforge.dialects.cuda.ops import CudaKernelOp, ProgramOp
from irforge.dialects.cuda.prelude import PRELUDE_NAME, prelude_functions
from irforge.dialects.kernel import examples
from irforge.dialects.kernel.builder import KernelBuilder, Val
from irforge.dialects.kernel.types import PtrType, SmemType

from irforge.diagnostics import IRForgeError
from irforge.location import FileLineColLoc, NameLoc
from irforge.parser import parse_module
from irforge.pass_manager import run_pipeline
from irforge.printer import print_module
from irforge.runtime.nvrtc import compile_cuda
from irforge.scalar_ops import SCALAR_OPS
from irforge.types import ScalarType

f32 = ScalarType("f32")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IRFORGE_CACHE_DIR", str(tmp_path / "cache"))


def lower(text: str):
    m = parse_module(text)
    run_pipeline(m, "kernel-to-cuda")
    return m


@pytest.mark.parametrize("ex", examples.tiny_examples(), ids=lambda e: e.name)
def test_every_example_emits_and_compiles_for_sm90a(ex):
    m = lower(ex.ir)
    text = print_module(m)
    assert print_module(parse_module(text)) == text
    kernels = [op for op in m.body.ops if isinstance(op, CudaKernelOp)]
    assert len(kernels) == 1 and len([op for op in m.body.ops if isinstance(op, ProgramOp)]) == 1
    k = kernels[0]
    cubin = compile_cuda(k.attributes["source"], k.attributes["sym_name"], arch="sm_90a")
    assert cubin.image[:4] == b"\x7fELF"
    assert "error" not in cubin.log


def test_readable_output_names_origins_and_launch_config():
    ex = examples.rms_norm(2, 512, "bf16", block=64)
    m = parse_module(ex.ir)
    origin = NameLoc("aten.rms_norm", FileLineColLoc("model.py", 12, 5))
    for op in m.walk():
        if op.name in ("kernel.rsqrt", "kernel.mul"):
            op.loc = origin
    run_pipeline(m, "kernel-to-cuda")
    k = next(op for op in m.body.ops if isinstance(op, CudaKernelOp))
    src = k.attributes["source"]
    assert src.startswith("// k_rms_norm: grid (2, 1, 1), block (64, 1, 1), 0 bytes of dynamic shared memory\n")
    assert "// from: aten.rms_norm (model.py:12)\n" in src
    assert "  // aten.rms_norm (model.py:12)\n" in src
    assert f'#include "{PRELUDE_NAME}"' in src
    assert 'extern "C" __global__ void __launch_bounds__(64) k_rms_norm(' in src
    assert "const __nv_bfloat16* __restrict__ x," in src and "__nv_bfloat16* __restrict__ y) {" in src
    assert "__shared__ __align__(128) float partial[2];" in src
    assert "const float rstd = irf_rsqrt(var_eps);" in src
    assert "irf_load(xv, x + row * 512 + j);" in src
    assert "__shfl_xor_sync(0xffffffffu, sq_sum, 16, 32)" in src
    assert (k.attributes["grid"], k.attributes["block"], k.attributes["smem"]) == ((2, 1, 1), (64, 1, 1), 0)


def test_literals_and_half_math():
    text = """kernel.func @k_lit(%y: !kernel.ptr<f32>, %h: !kernel.ptr<bf16>) grid(1) block(1) {
  %inf = kernel.const -inf : f32
  %nan = kernel.const nan : f32
  %e = kernel.const 1e-06 : f32
  %b = kernel.const 0.1 : bf16
  %s = kernel.add %b, %b : bf16
  %x = kernel.exp %b : bf16
  %lt = kernel.lt %b, %s : bool
  %c = kernel.cast %x : bf16 to f32
  %i = kernel.const 3 : index
  kernel.store %c, %y[%i]
  kernel.store %s, %h[0]
}
"""
    src = lower(text).body.ops[0].attributes["source"]
    assert "const float inf = __int_as_float(0xff800000);" in src
    assert "const float nan = __int_as_float(0x7fc00000);" in src
    assert "const float e = 1e-06f;" in src
    assert "const __nv_bfloat16 b = __float2bfloat16(0.1f);" in src
    assert "const __nv_bfloat16 s = __float2bfloat16((irf_f32(b) + irf_f32(b)));" in src
    assert "const __nv_bfloat16 x = irf_exp(b);" in src
    assert "const bool lt = (irf_f32(b) < irf_f32(s));" in src
    assert "const float c = irf_cast<float>(x);" in src
    compile_cuda(src, "k_lit")


def test_dynamic_shared_memory_sets_the_launch_size():
    kb = KernelBuilder.kernel("k_big", [PtrType(f32)], grid=1, block=128, names=["y"])
    (y,) = kb.args
    big = kb.smem(SmemType(f32, (2, 8192)), dynamic=True, hint="stage")
    small = kb.smem(SmemType(f32, (100,)), dynamic=True, hint="extra")
    t = kb.thread_id("x", "t")
    v = kb.const(1.0, f32, "one")
    kb.store(v, big, [1, Val(t)])
    kb.store(v, small, [Val(t) % 100])
    kb.barrier()
    kb.store(kb.load(big, [1, Val(t)], f32, "r"), y, [Val(t)])
    from irforge.builtin import ModuleOp

    m = ModuleOp()
    m.body.append(kb.op)
    run_pipeline(m, "kernel-to-cuda")
    k = m.body.ops[0]
    assert k.attributes["smem"] == 65536 + 512  # each buffer rounded up to 128 bytes
    src = k.attributes["source"]
    assert "float* const extra = reinterpret_cast<float*>(irf_dynamic_smem + 65536);" in src
    compile_cuda(src, "k_big")


def test_static_shared_memory_over_48kb_is_refused():
    text = "kernel.func @k() grid(1) block(32) {\n  %s = kernel.smem f32[16384]\n}\n"
    with pytest.raises(IRForgeError, match="over the 49152-byte limit; mark the largest buffers `dynamic`"):
        lower(text)


def test_loop_carries_swap_through_temporaries():
    text = """kernel.func @k_swap(%y: !kernel.ptr<f32>) grid(1) block(1) {
  %a = kernel.const 1.0 : f32
  %b = kernel.const 2.0 : f32
  %r1, %r2 = kernel.for %i in 0 .. 3 carry(%p <- %a : f32, %q <- %b : f32) {
    kernel.yield %q, %p
  }
  kernel.store %r1, %y[0]
}
"""
    src = lower(text).body.ops[0].attributes["source"]
    assert "const float irf_next0 = q;" in src and "p = irf_next0;" in src and "q = irf_next1;" in src
    compile_cuda(src, "k_swap")


def test_prelude_covers_the_scalar_op_table():
    funcs = prelude_functions()
    halves_and_floats = {"float", "double", "__half", "__nv_bfloat16"}
    ints = {"long long", "int", "short", "signed char", "unsigned char"}
    for name, op in SCALAR_OPS.items():
        if op.infix or op.kind in ("select", "cast"):
            continue
        if op.kind == "math" or name in ("floordiv", "remainder", "maximum", "minimum", "neg", "abs", "sign"):
            assert halves_and_floats <= funcs[name], name
        if op.kind == "arith" or name == "not":
            assert ints <= funcs[name], name


def test_every_prelude_function_compiles_for_every_type():
    calls = []
    for name, types in prelude_functions().items():
        arity = SCALAR_OPS[name].arity
        for i, t in enumerate(sorted(types)):
            args = ", ".join([f"({t})x"] * arity)
            calls.append(f"  {{ {t} r = irf_{name}({args}); out[{i}] += (float)irf_cast<float>(r); }}")
    for i, t in enumerate(["float", "double", "__half", "__nv_bfloat16", "int", "long long", "bool"]):
        calls.append(f"  out[{i}] += irf_cast<float>(irf_cast<{t}>(x));")
    src = (
        f'#include "{PRELUDE_NAME}"\nextern "C" __global__ void k(float* out, float x) {{\n'
        + "\n".join(calls)
        + "\n}\n"
    )
    compile_cuda(src, "prelude_all", arch="sm_90a")


def test_mma_fragment_addresses_follow_the_layout_table():
    ex = examples.mma_linear(16, 8, 16)
    src = lower(ex.ir).body.ops[0].attributes["source"]
    # a[0] of lane (g, t) is A[g, 2t]; b (stored N x K, transposed) b[0] is B[2t, g] = W[g, 2t]
    assert "fa[0] = as[irf_g * 16 + irf_t * 2];" in src
    assert "fa[7] = as[(irf_g + 8) * 16 + (irf_t * 2 + 9)];" in src
    assert "fb[0] = ws[irf_g * 16 + irf_t * 2];" in src
    assert "fb[3] = ws[irf_g * 16 + (irf_t * 2 + 9)];" in src
    assert "irf_mma_m16n8k16(c2[0], c2[1], c2[2], c2[3], fa + 0, fb + 0);" in src
    assert "y[tm * 128 + tn * 8 + (irf_g + 8) * 8 + (irf_t * 2 + 1)] = acc[3];" in src


def test_index_expressions_in_c():
    from irforge.passes.kernel_to_cuda.c_text import c_index

    from irforge import index_expr as ix

    e = ix.Sub(ix.Dim(0), ix.Add(ix.Dim(1), ix.Const(2)))
    assert c_index(e, lambda i: "ab"[i]) == "a - (b + 2)"
    assert c_index(ix.CeilDiv(ix.Dim(0), ix.Const(4)), lambda i: "n") == "((n + 4 - 1) / 4)"
    assert c_index(ix.Mul(ix.Min(ix.Dim(0), ix.Const(3)), ix.Const(2)), lambda i: "k") == "min(k, 3) * 2"
    assert c_index(ix.Mod(ix.Mul(ix.Dim(0), ix.Const(4)), ix.Const(3)), lambda i: "k") == "k * 4 % 3"
    assert c_index(ix.Mul(ix.Dim(0), ix.Mod(ix.Dim(0), ix.Const(3))), lambda i: "k") == "k * (k % 3)"
    # C agrees with the IR's semantics on non-negative operands (the simulator refuses negative ones).
    for a in range(0, 20):
        assert (
            eval(
                c_index(ix.Sub(ix.FloorDiv(ix.Const(a), ix.Const(3)), ix.Mod(ix.Const(a), ix.Const(4))), str).replace(
                    "/", "//"
                )
            )
            == a // 3 - a % 4
        )


def test_every_scalar_op_and_cast_program_simulates_and_compiles():
    """The programs the GPU self-check runs (one per scalar op and dtype, one per cast): each runs in the simulator,
    and their emitted CUDA compiles (as one translation unit, to keep NVRTC's start-up cost to one)."""
    from irforge.dialects.kernel.simulator import run

    from irforge.runtime import selfcheck

    progs = [selfcheck.cast_program(s, d) for s in selfcheck.DTYPES for d in selfcheck.DTYPES if s != d]
    for name in SCALAR_OPS:
        progs += [p for p in (selfcheck.scalar_op_program(name, d) for d in selfcheck.DTYPES) if p is not None]
    sources = []
    for ir, ins in progs:
        run(parse_module(ir), ins)
        sources.append(lower(ir).body.ops[0].attributes["source"])
    include = f'#include "{PRELUDE_NAME}"'
    unit = include + "\n" + "\n".join(s.replace(include, "") for s in sources)
    compile_cuda(unit, "every_scalar_op", arch="sm_90a")


def _c_value(text: str, names: dict[str, int]) -> int:
    """The value of an emitted C index expression (non-negative operands: `/` and `%` are Python's `//` and `%`)."""
    import re

    def swizzle(b, m, s, o):
        return o ^ (((o >> (m + s)) & ((1 << b) - 1)) << m)

    def swizzle_row(b, m, s, r):
        return ((r >> (m + s)) & ((1 << b) - 1)) << m

    py = re.sub(r"irf_swizzle(_row)?<(\d+), (\d+), (\d+)>\(", r"swizzle\1(\2, \3, \4, ", text).replace("/", "//")
    return eval(py, {"swizzle": swizzle, "swizzle_row": swizzle_row}, dict(names))


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([(3, 3, 3), (2, 3, 3), (1, 3, 3), (3, 4, 3), (2, 2, 3), (3, 3, 4)]),
    st.integers(1, 3),
    st.integers(2, 9),
    st.sampled_from([1, 2, 4]),
    st.integers(0, 3),
    st.data(),
)
def test_shared_offsets_in_c_are_the_swizzled_offsets(swizzle, rank, col_log2, scale, leading, data):
    """`smem_offset_text`, evaluated as C evaluates it, is the swizzled row-major offset times `scale` at random
    points: for every index rank given (the leading dimensions only, as a TMA box's slot), with and without an
    extra offset, whether or not the rows are short enough for the row/column split."""
    from irforge.passes.kernel_to_cuda.c_text import smem_offset_text

    from irforge import index_expr as ix

    shape = (*(3, 5, 8)[: rank - 1], 1 << col_log2)
    t = SmemType(ScalarType("bf16"), shape, swizzle)
    n = min(leading, rank) or rank
    offset = data.draw(st.sampled_from([0, 0, 8]))
    point = [data.draw(st.integers(0, d - 1)) for d in shape[:n]]
    exprs = [ix.Dim(i) * 1 + 0 for i in range(n)]
    names = {f"d{i}": v for i, v in enumerate(point)}
    text = smem_offset_text(exprs, t, lambda i: f"d{i}", offset=offset, scale=scale)
    linear = sum(p * s for p, s in zip(point, t.strides)) + offset
    b, m, s = swizzle
    want = scale * (linear ^ (((linear >> (m + s)) & ((1 << b) - 1)) << m))
    assert _c_value(text, names) == want, text
