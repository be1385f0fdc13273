"""The kernel-level SIMT simulator: hand-written kernels against numpy, and the mistakes it must catch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from irforge.dialects.kernel import examples
from irforge.dialects.kernel.simulator import run

from irforge.diagnostics import IRForgeError
from irforge.interpreter import interpret
from irforge.parser import parse_module


def rel_err(out, ref) -> float:
    out = np.asarray(out, dtype=np.float64)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


@pytest.mark.parametrize("ex", examples.tiny_examples(), ids=lambda e: e.name)
def test_examples_match_numpy(ex):
    rng = np.random.default_rng(7)
    m = parse_module(ex.ir, f"{ex.name}.ir")
    ins = ex.make_inputs(rng)
    outs = run(m, ins)
    refs = ex.reference(ins)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape
        assert rel_err(o, r) < ex.rtol


@settings(max_examples=12, deadline=None)
@given(rows=st.integers(1, 3), cols=st.integers(1, 300), seed=st.integers(0, 2**16))
def test_row_sum_any_shape(rows, cols, seed):
    ex = examples.row_sum(rows, cols, block=64)
    x = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)
    (y,) = run(parse_module(ex.ir), [x])
    np.testing.assert_allclose(y, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


@settings(max_examples=8, deadline=None)
@given(
    rows=st.integers(1, 3), chunks=st.integers(1, 4), dtype=st.sampled_from(["f32", "bf16"]), seed=st.integers(0, 99)
)
def test_softmax_any_shape(rows, chunks, dtype, seed):
    block = 32
    ex = examples.softmax(rows, chunks * block * (16 // (4 if dtype == "f32" else 2)), dtype, block=block)
    ins = ex.make_inputs(np.random.default_rng(seed))
    (y,) = run(parse_module(ex.ir), ins)
    assert rel_err(y, ex.reference(ins)[0]) < ex.rtol


def test_interpret_dispatches_to_the_simulator_and_binds_params():
    text = """kernel.func @k_scale(%x: !kernel.ptr<f32>, %w: !kernel.ptr<f32>, %y: !kernel.ptr<f32>) grid(1) block(32) {
  %t = kernel.thread_id x
  %a = kernel.load %x[%t] : f32
  %b = kernel.load %w[%t] : f32
  %p = kernel.mul %a, %b : f32
  kernel.store %p, %y[%t]
}
func.func @forward(%x: f32[32]) -> f32[4,8] {
  %w = kernel.param @scale.weight : f32[32]
  %y = kernel.alloc : f32[32]
  kernel.launch @k_scale(%x, %w, %y)
  %v = kernel.view %y : f32[4,8]
  func.return %v
}
"""
    m = parse_module(text)
    x = np.arange(32, dtype=np.float32)
    w = np.full(32, 0.5, dtype=np.float32)
    (y,) = interpret(m, [x], {"scale.weight": w})
    np.testing.assert_array_equal(y, (x * 0.5).reshape(4, 8))
    (y1,) = interpret(m, {"x": x})  # a missing param is random, but the same every run
    (y2,) = interpret(m, {"x": x})
    np.testing.assert_array_equal(y1, y2)
    assert not np.array_equal(y1, (x * 0.5).reshape(4, 8))


# ---- mistakes the simulator must catch ------------------------------------------------------------------------
def _kernel(
    body: str, block: int = 64, grid: int = 1, params: str = "%x: !kernel.ptr<f32>, %y: !kernel.ptr<f32>", n: int = 64
) -> str:
    return f"""kernel.func @k({params}) grid({grid}) block({block}) {{
{body}}}
func.func @forward(%x: f32[{n}]) -> f32[{n}] {{
  %y = kernel.alloc : f32[{n}]
  kernel.launch @k(%x, %y)
  func.return %y
}}
"""


def _fails(text: str, message: str, n: int = 64) -> str:
    with pytest.raises(IRForgeError) as e:
        run(parse_module(text, "planted.ir"), [np.ones(n, dtype=np.float32)])
    rendered = e.value.render()
    assert message in rendered, rendered
    assert rendered.startswith("planted.ir:")
    return rendered


NEIGHBOUR = """  %s = kernel.smem f32[64]
  %t = kernel.thread_id x
  %v = kernel.load %x[%t] : f32
  kernel.store %v, %s[%t]
{sync}  %u = kernel.load %s[(%t + 1) mod 64] : f32
  kernel.store %u, %y[%t]
"""


def test_neighbour_exchange_with_a_barrier_is_clean():
    (y,) = run(parse_module(_kernel(NEIGHBOUR.format(sync="  kernel.barrier\n"))), [np.arange(64, dtype=np.float32)])
    np.testing.assert_array_equal(y, np.roll(np.arange(64, dtype=np.float32), -1))


def test_planted_missing_barrier_is_caught():
    text = _kernel(NEIGHBOUR.format(sync=""))
    rendered = _fails(
        text, "race: thread (0, 0, 0) reads shared address 1, which thread (1, 0, 0) wrote since the last"
    )
    assert "kernel.load %s[(%t + 1) mod 64]" in rendered  # the offending line, quoted
    # Across warps, warp 0 runs ahead and reads before warp 1 writes: the other order of the same race.
    _fails(
        text.replace("(%t + 1) mod 64", "(%t + 32) mod 64"),
        "race: thread (0, 0, 0) reads shared address 32 before thread (32, 0, 0) writes it",
    )


SPLIT = """  %t = kernel.thread_id x
  %c = kernel.const {consumers} : index
  %mine = kernel.lt %t, %c : bool
  kernel.if %mine {{
    kernel.setmaxnreg inc {more}
  }} else {{
    kernel.setmaxnreg dec {fewer}
  }}
  %v = kernel.load %x[%t] : f32
  kernel.store %v, %y[%t]
"""


def test_a_producer_warpgroup_hands_its_registers_to_the_consumers():
    """384 threads start with 168 registers each; a producer warpgroup down to 40 frees 128 x 128, which lifts the
    other 256 threads to 232 (`warpgroup.register_split`). Asking for 240 overdraws the file (the GPU's
    setmaxnreg.inc would wait forever), and a warpgroup whose warps disagree (a branch inside it) is refused."""
    from irforge.dialects.kernel.warpgroup import register_split

    assert register_split(256) == (40, 232) and register_split(128) is None
    text = _kernel(SPLIT.format(consumers=256, more=232, fewer=40), block=384, n=384)
    (y,) = run(parse_module(text), [np.arange(384, dtype=np.float32)])
    np.testing.assert_array_equal(y, np.arange(384, dtype=np.float32))
    _fails(_kernel(SPLIT.format(consumers=256, more=240, fewer=40), block=384, n=384), "would wait forever", n=384)
    _fails(
        _kernel(SPLIT.format(consumers=192, more=232, fewer=40), block=384, n=384),
        "the warps of warpgroup 1 set different register counts",
        n=384,
    )


def test_missing_barrier_in_block_reduction_is_caught():
    ex = examples.row_sum(2, 100, block=128)
    broken = ex.ir.replace("  }\n  kernel.barrier\n", "  }\n", 1)
    assert broken != ex.ir
    with pytest.raises(IRForgeError, match=r"nothing has written|race"):
        run(parse_module(broken), [np.ones((2, 100), dtype=np.float32)])


def test_two_threads_writing_one_shared_address():
    body = (
        "  %s = kernel.smem f32[4]\n  %t = kernel.thread_id x\n  %c = kernel.const 1.0 : f32\n"
        "  kernel.store %c, %s[0]\n"
    )
    _fails(
        _kernel(body + "  kernel.store %c, %y[%t]\n"),
        "race: thread (0, 0, 0) and thread (1, 0, 0) write shared address 0 in the same step",
    )


def test_write_after_read_without_barrier():
    ex = examples.cp_async_scale(512, tiles_per_block=4, block=32, second_barrier=False)
    with pytest.raises(IRForgeError, match=r"overwrites shared address \d+, which .* read since the last barrier"):
        run(parse_module(ex.ir), ex.make_inputs(np.random.default_rng(0)))


def test_read_of_unwritten_shared_memory():
    body = (
        "  %s = kernel.smem f32[64]\n  %t = kernel.thread_id x\n  %v = kernel.load %s[%t] : f32\n"
        "  kernel.store %v, %y[%t]\n"
    )
    _fails(_kernel(body), "reads shared address 0, which nothing has written")


def test_read_before_cp_async_wait():
    body = """  %s = kernel.smem f32[256]
  %t = kernel.thread_id x
  kernel.cp_async %x[%t * 4 mod 64] -> %s[%t * 4] : f32[4]
  kernel.cp_async_commit
  %v = kernel.load %s[%t * 4] : f32
  kernel.store %v, %y[%t]
"""
    _fails(_kernel(body), "before the async copy into it completed")


def test_barrier_in_divergent_code():
    body = """  %t = kernel.thread_id x
  %c16 = kernel.const 16 : index
  %lo = kernel.lt %t, %c16 : bool
  kernel.if %lo {
    kernel.barrier
  }
  %v = kernel.load %x[%t] : f32
  kernel.store %v, %y[%t]
"""
    _fails(_kernel(body), "barrier reached by only part of the warp")


def test_warps_at_different_barriers():
    body = """  %w = kernel.warp_id
  %c0 = kernel.const 0 : index
  %first = kernel.eq %w, %c0 : bool
  kernel.if %first {
    kernel.barrier
  } else {
    kernel.barrier
  }
"""
    _fails(_kernel(body), "waits at this barrier while warp 0 waits at another")


def test_shuffle_in_divergent_code():
    body = """  %t = kernel.thread_id x
  %v = kernel.load %x[%t] : f32
  %c8 = kernel.const 8 : index
  %lo = kernel.lt %t, %c8 : bool
  kernel.if %lo {
    %s = kernel.shfl_xor %v, 1 : f32
    kernel.store %s, %y[%t]
  }
"""
    _fails(_kernel(body), "a shuffle needs all 32 lanes")


def test_mbarrier_deadlock():
    body = """  %b = kernel.smem mbarrier[1]
  %t = kernel.thread_id x
  %c0 = kernel.const 0 : index
  %leader = kernel.eq %t, %c0 : bool
  kernel.if %leader {
    kernel.mbarrier_init %b[0], 2
  }
  kernel.barrier
  kernel.mbarrier_arrive %b[0]
  kernel.mbarrier_wait %b[0], parity 0
"""
    _fails(
        _kernel(body.replace("kernel.mbarrier_init %b[0], 2", "kernel.mbarrier_init %b[0], 64"), block=32),
        "deadlock: the mbarrier phase this warp waits for never completes",
    )
    _fails(
        _kernel(body.replace("  kernel.if %leader {\n    kernel.mbarrier_init %b[0], 2\n  }\n", ""), block=32),
        "arrives on an mbarrier that was never initialised",
    )


def test_out_of_bounds_and_misaligned_accesses():
    _fails(
        _kernel("  %t = kernel.thread_id x\n  %v = kernel.load %x[%t + 1] : f32\n  kernel.store %v, %y[%t]\n"),
        "outside its 64 elements",
    )
    body = "  %t = kernel.thread_id x\n  %v = kernel.load %x[%t mod 8 * 4 + 2] : f32[4]\n  kernel.store %v, %y[0]\n"
    _fails(_kernel(body, block=1), "a 16-byte vector access at element 2 is not 16-byte aligned")


def test_unwritten_output_and_cross_block_write():
    _fails(
        _kernel("  %t = kernel.thread_id x\n  %v = kernel.load %x[%t] : f32\n  kernel.store %v, %y[%t]\n", block=32),
        "has 32 element(s) no kernel wrote",
    )
    body = "  %t = kernel.thread_id x\n  %v = kernel.load %x[%t] : f32\n  kernel.store %v, %y[%t]\n"
    _fails(_kernel(body, grid=2), "written by two threads in one launch")


def test_negative_index_division():
    body = "  %t = kernel.thread_id x\n  %v = kernel.load %x[(%t - 1) mod 64] : f32\n  kernel.store %v, %y[%t]\n"
    _fails(_kernel(body), "needs a non-negative dividend")


@pytest.mark.parametrize("monoid", ["add", "max", "online"])
def test_warp_allreduce_of_monoid_carriers(monoid):
    """KernelBuilder.warp_allreduce expands scalar_ops' combine programs (the online-softmax carrier too)."""
    from irforge.dialects.kernel import ops as K
    from irforge.dialects.kernel.builder import KernelBuilder, Val
    from irforge.dialects.kernel.types import PtrType

    from irforge.attributes import SymbolRef
    from irforge.builtin import FuncOp, ModuleOp, ReturnOp
    from irforge.printer import print_module
    from irforge.types import ScalarType, tensor

    f32 = ScalarType("f32")
    kb = KernelBuilder.kernel("k_allreduce", [PtrType(f32)] * 2, grid=2, block=64, names=["x", "y"])
    x, y = kb.args
    t, b = kb.thread_id("x", "t"), kb.block_id("x", "b")
    v = kb.load(x, [Val(b) * 64 + Val(t)], f32, "v")
    carrier = [v, kb.const(1.0, f32, "one")] if monoid == "online" else [v]
    out = kb.warp_allreduce(monoid, carrier)
    for k, c in enumerate(out):
        kb.store(c, y, [(Val(b) * 64 + Val(t)) * len(out) + k])
    m = ModuleOp()
    m.body.append(kb.op)
    n_out = 128 * len(out)
    host = FuncOp.build("forward", [tensor(f32, 128)], [tensor(f32, n_out)], ["x"])
    hb = KernelBuilder(host.body)
    buf = hb._add(K.AllocOp((), [tensor(f32, n_out)]), "out")
    hb._add(K.LaunchOp([host.body.args[0], buf], (), {"callee": SymbolRef("k_allreduce")}))
    host.body.append(ReturnOp([buf], ()))
    m.body.append(host)
    xs = np.random.default_rng(3).standard_normal(128).astype(np.float32)
    (got,) = run(parse_module(print_module(m)), [xs])
    got = got.reshape(128, len(out))
    warps = xs.astype(np.float64).reshape(4, 32)
    if monoid == "add":
        want = np.repeat(warps.sum(axis=1), 32)[:, None]
    elif monoid == "max":
        want = np.repeat(warps.max(axis=1), 32)[:, None]
    else:
        mx = warps.max(axis=1)
        want = np.stack([np.repeat(mx, 32), np.repeat(np.exp(warps - mx[:, None]).sum(axis=1), 32)], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    # and the same kernel's CUDA compiles
    from irforge.pass_manager import run_pipeline
    from irforge.runtime.nvrtc import compile_cuda

    run_pipeline(m, "kernel-to-cuda")
    compile_cuda(m.body.ops[0].attributes["source"], "k_allreduce", arch="sm_90a")


def test_ldmatrix_rows_must_be_aligned_16_byte_pieces():
    ex = examples.ldmatrix_mma(16, 8, 32, a_t=False, b_t=True)
    rng = np.random.default_rng(0)
    # The A tile starting 4 columns in: each 8-element matrix row starts 8 bytes past a 16-byte boundary.
    shifted = ex.ir.replace("%fa = kernel.ldmatrix %as[0, %k0]", "%fa = kernel.ldmatrix %as[0, %k0 floordiv 2 + 4]")
    shifted = shifted.replace("%k0 in 0 .. 32 step 16", "%k0 in 0 .. 16 step 16")
    with pytest.raises(IRForgeError) as e:
        run(parse_module(shifted, "planted.ir"), ex.make_inputs(rng))
    assert "row 0 of 8 x 8 matrix 0 is not 16 contiguous bytes aligned to 16" in e.value.render()
    # A swizzle that moves 8-byte pieces splits a matrix row; the verifier names what ldmatrix needs.
    swizzled = ex.ir.replace("%as = kernel.smem bf16[16,32]", "%as = kernel.smem bf16[16,32] swizzle(2, 2, 3)")
    with pytest.raises(IRForgeError) as e:
        parse_module(swizzled, "planted.ir")
    assert "rows of whole 16-byte pieces that a swizzle keeps together" in e.value.render()
    # The same swizzle on 16-byte pieces keeps every matrix row whole: the product is unchanged.
    kept = ex.ir.replace("%as = kernel.smem bf16[16,32]", "%as = kernel.smem bf16[16,32] swizzle(2, 3, 3)")
    ins = ex.make_inputs(rng)
    (y,) = run(parse_module(kept), ins)
    np.testing.assert_allclose(y, ex.reference(ins)[0], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("a_t", [False, True])
@pytest.mark.parametrize("b_t", [False, True])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_ldmatrix_and_multi_atom_mma_in_every_storage_order(a_t, b_t, dtype):
    ex = examples.ldmatrix_mma(32, 24, 32, a_t=a_t, b_t=b_t, dtype=dtype)
    ins = ex.make_inputs(np.random.default_rng(1))
    (y,) = run(parse_module(ex.ir), ins)
    np.testing.assert_allclose(y, ex.reference(ins)[0], rtol=1e-5, atol=1e-4)


# ---- wgmma -----------------------------------------------------------------------------------------------------
def _wgmma_run(ir: str, ex):
    ins = ex.make_inputs(np.random.default_rng(3))
    return run(parse_module(ir, "wgmma.ir"), ins), ex.reference(ins)


def _wgmma_fails(ir: str, ex, message: str) -> None:
    with pytest.raises(IRForgeError) as e:
        _wgmma_run(ir, ex)
    assert message in e.value.render() and e.value.render().startswith("wgmma.ir:"), e.value.render()


def test_wgmma_reads_its_operands_through_the_descriptor_layout():
    """The simulator reads a wgmma's tiles where the descriptor says (groups of 8 rows, the hardware's swizzle of
    absolute addresses), not through the buffer's own indexing: a tile whose first row is not a multiple of 8 is
    refused, and a buffer written in another layout than the one the descriptor names is refused by the op."""
    ex = examples.wgmma_linear(16, 64, bk=64, warpgroups=2)
    (y,), (ref,) = _wgmma_run(ex.ir, ex)
    assert rel_err(y, ref) < 1e-5
    _wgmma_fails(
        ex.ir.replace("%as[%row, %ks * 16]", "%as[%row + 4, %ks * 16]"), ex, "does not start a group of 8 rows"
    )
    dense = ex.ir.replace("[128, 64], [128, 64], 128>", "[128, 64], [128, 64]>").replace(
        "bf16[128,64] swizzle(3, 3, 3)", "bf16[128,64]"
    )
    with pytest.raises(IRForgeError, match=r"A: rows of 128 bytes need the 128-byte swizzle\(3, 3, 3\)"):
        parse_module(dense)


def test_wgmma_async_hazards_are_caught():
    """A wgmma is asynchronous: issuing one on registers other code wrote without a fence, reading its accumulator
    with no wait (it reads as NaN, as the registers would hold garbage), and overwriting its operands' shared memory
    before the wait (a group left in flight while the next chunk's copy lands in the one buffer) are each caught."""
    ex = examples.wgmma_linear(16, 128, bk=64)
    _wgmma_fails(ex.ir.replace("    kernel.wgmma_fence\n", ""), ex, "no kernel.wgmma_fence since")
    (y,), _ = _wgmma_run(ex.ir.replace("    kernel.wgmma_wait 0\n", ""), ex)
    assert np.isnan(y).all()
    _wgmma_fails(
        ex.ir.replace("kernel.wgmma_wait 0", "kernel.wgmma_wait 1"), ex, "written before its kernel.wgmma_wait"
    )


def test_wgmma_takes_a_from_registers_and_b_mn_major():
    """A from the warpgroup's registers and B stored [16, N] (MN-major, as attention's V) give the product, read
    through the same descriptor with rows and columns exchanged; a tile of B that would run past its rows' span,
    and A registers a wgmma reads without a fence since they were written, are refused; the op refuses an A
    fragment of another shape and a transposed B narrower than its buffer. A fence before the loop covers the
    accumulator but not the A loaded after it."""
    ex = examples.wgmma_registers_a(64, 128, bk=64, warpgroups=2)
    (y,), (ref,) = _wgmma_run(ex.ir, ex)
    assert rel_err(y, ref) < 1e-5
    _wgmma_fails(ex.ir.replace("%vs[%ks * 16, 0]", "%vs[%ks * 16, 8]"), ex, "leaves its rows' span")
    early = ex.ir.replace("      kernel.wgmma_fence\n", "").replace(
        "    %c1 = kernel.for %ks", "    kernel.wgmma_fence\n    %c1 = kernel.for %ks"
    )
    _wgmma_fails(early, ex, "reads A's registers with no kernel.wgmma_fence since they were written")
    with pytest.raises(IRForgeError, match=r'takes A from registers as a !kernel.frag<"a", bf16, \[64, 16\]'):
        parse_module(ex.ir.replace('"a", bf16, [64, 16], "wgmma"', '"a", bf16, [64, 32], "wgmma"'))
    narrow = ex.ir.replace('[64, 64], "wgmma">', '[64, 32], "wgmma">')
    with pytest.raises(IRForgeError, match=r"B stored \[16, N\] \(transpose\) fills the rows of its buffer"):
        parse_module(narrow)


def test_wgmma_b_mn_major_across_blocks():
    """B stored MN-major in blocks of 64 columns ([2, 16, 64]: V at head dimension 128, a box of the copy engine a
    block) is read across both blocks, its descriptor's LBO the distance between them (2048 bytes); with the LBO
    of a single span (16 bytes, unused there) the columns past 64 read other elements and the product differs;
    starting past the first column, or with N not whole blocks, is refused."""
    from irforge.dialects.kernel import warpgroup as WG

    ex = examples.wgmma_registers_a(128, 32, bk=16)
    (y,), (ref,) = _wgmma_run(ex.ir, ex)
    assert rel_err(y, ref) < 1e-5
    (op,) = [o for o in parse_module(ex.ir).walk() if isinstance(o, WG.WgmmaOp)]
    assert op.b_blocks() == 2 and op.descriptor("b") == WG.Descriptor(128, 1024, 2048)
    single = WG.WgmmaOp.descriptor
    try:
        WG.WgmmaOp.descriptor = lambda self, which: WG.descriptor(getattr(self, which).type)
        (wrong,), _ = _wgmma_run(ex.ir, ex)
    finally:
        WG.WgmmaOp.descriptor = single
    assert rel_err(wrong, ref) > 0.1
    _wgmma_fails(ex.ir.replace("%vs[0, %ks * 16, 0]", "%vs[0, %ks * 16, 8]"), ex, "leaves its rows' span")
    with pytest.raises(IRForgeError, match=r"or whole blocks of its third-to-last dimension: N = 96"):
        parse_module(ex.ir.replace('[64, 128], "wgmma">', '[64, 96], "wgmma">'))


def test_wgmma_descriptor_bits():
    """PTX's matrix-descriptor format, by hand: a 128-byte-swizzled K-major bf16 tile at shared address 0x400 has
    start 0x400 >> 4 = 0x40 (bits 0-13), LBO 1 (16 bytes, bits 16-29), SBO 1024 >> 4 = 64 (bits 32-45) and mode 1
    (bits 62-63); rows of 64 bytes: SBO 512 >> 4 = 32, mode 2; rows of 32 bytes: SBO 16, mode 3."""
    from irforge.dialects.kernel.types import SmemType
    from irforge.dialects.kernel.warpgroup import Descriptor, descriptor

    from irforge.types import bf16

    assert descriptor(SmemType(bf16, (64, 64), (3, 3, 3))).bits(0x400) == 0x40 | 1 << 16 | 64 << 32 | 1 << 62
    assert descriptor(SmemType(bf16, (3, 64, 32), (2, 3, 3))).bits(0) == 1 << 16 | 32 << 32 | 2 << 62
    assert descriptor(SmemType(bf16, (64, 16), (1, 3, 3))).bits(0) == 1 << 16 | 16 << 32 | 3 << 62
    assert "rows of 64 bytes need" in descriptor(SmemType(bf16, (64, 32)))
    # MN-major across blocks: LBO 2048 >> 4 = 128 at bits 16-29
    assert Descriptor(128, 1024, 2048).bits(0) == 128 << 16 | 64 << 32 | 1 << 62


def test_wgmma_operand_address_across_blocks():
    """Element (k, n) of an MN-major tile of 128-byte rows whose blocks of 64 columns are 4096 bytes apart, by hand:
    (0, 64) is the second block's first byte, 4096 (its row 0 unswizzled); (1, 65) is that block's row 1 (+128),
    byte 2, whose 16-byte chunk 0 the swizzle XORs with row 1: chunk 1, so 4096 + 128 + 16 + 2 = 4242; (9, 1) is in
    the second group of 8 rows (+ SBO 1024), row 1 of it: 1024 + 128 + 16 + 2 = 1170."""
    from irforge.dialects.kernel.warpgroup import Descriptor, operand_address

    d = Descriptor(128, 1024, 4096)
    assert [operand_address(d, 0, k, n, 2) for k, n in ((0, 64), (1, 65), (9, 1))] == [4096, 4242, 1170]
