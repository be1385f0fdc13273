"""tile -> kernel materialization: the kernel simulator agrees with the tile interpreter (random programs, random
schedules, and the seed's RMSNorm and softmax), the emitted kernels use the intended primitives, and what cannot be
materialized is refused with a located message."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from irforge.dialects import tile as T
from irforge.dialects.kernel import ops as K
from irforge.dialects.tile.algebra import contractions_in
from loopgen import contraction_programs
from tilegen import CONTRACTION_OPTIONS, assert_close, in_order, loop_programs, runs_somewhere, schedule, schedules

from irforge.diagnostics import IRForgeError
from irforge.interpreter import interpret
from irforge.parser import parse_module
from irforge.pass_manager import run_pipeline
from irforge.pipeline import module_level
from irforge.printer import print_module


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(loop_programs(), schedules())
def test_materialized_schedules_keep_the_answer(module, passes):
    assume(runs_somewhere(module))
    assume(schedule(module, passes) is None)
    expected = interpret(module, seed=4)
    run_pipeline(module, "tile-to-kernel")
    assert module_level(module) == "kernel"
    assert_close(expected, interpret(module, seed=4), module, f"schedule {passes}:\n{print_module(module)}")


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    contraction_programs(dims=st.sampled_from((1, 3, 4, 8, 16)), ks=st.sampled_from((1, 4, 8, 16, 32))),
    st.one_of(schedules(), in_order(CONTRACTION_OPTIONS, keep=9)),
)
def test_materialized_contraction_schedules_keep_the_answer(module, passes):
    """Tiny contractions with prologues and epilogues under any schedule (the contraction passes in the pipeline's
    order with options under which they act, or any passes in any order): the kernel simulator gives the loop
    interpreter's answer, and reads no stage before its copy is waited for."""
    run_pipeline(module, "tensor-to-loop")
    assume(runs_somewhere(module))
    expected = interpret(module, seed=6)
    assume(schedule(module, passes) is None)
    run_pipeline(module, "tile-to-kernel")
    assert_close(expected, interpret(module, seed=6), module, f"schedule {passes}:\n{print_module(module)}")


def test_the_default_schedule_of_a_linear_layer_matches_eager():
    """`lin(F.silu(g) * u)`, 32 x 32 outputs over K = 64, through the default pipeline (whatever tile sizes the
    heuristics pick): the contraction's kernel has output tiles on blocks, a register tile of both M and N per
    thread, K in chunks whose two slabs (A's rows and nn.Linear's weight rows) are staged in rings copied
    asynchronously ahead of the chunk that reads them; the kernel simulator matches PyTorch eager."""
    from irforge import frontend
    from irforge.compiler import compile_program

    code = "g=torch.randn(32,64); u=torch.randn(32,64); lin=nn.Linear(64,32); lin(F.silu(g) * u)"
    prog = compile_program(frontend.from_snippet(code), "tile")
    (k,) = [op for op in prog.module.walk() if isinstance(op, T.KernelOp) and contractions_in(op)]
    (tiles,) = [lp for lp in k.walk() if isinstance(lp, T.ForOp) and "threadIdx.x" in lp.bind]
    assert len(tiles.extents) == 2 and all(v > 1 for v in tiles.vector_shape), tiles.vector_shape
    chunks = [s for s in k.walk() if isinstance(s, T.StageOp) and isinstance(s.parent_op, T.ReduceOp)]
    assert [(s.source.name_hint, s.copy) for s in chunks] == [("lin.weight", "async"), ("mul", "async")]
    (inner,) = [r for r in k.walk() if isinstance(r, T.ReduceOp) and isinstance(r.parent_op, T.ReduceOp)]
    bm, bn = tiles.extents
    assert [s.box for s in chunks] == [(bn, inner.extents[0]), (bm, inner.extents[0])]
    assert all(s.ring > s.prefetch >= 1 for s in chunks)
    run_pipeline(prog.module, "tile-to-kernel")
    prog = dataclasses.replace(prog, level="kernel")
    for i, c in enumerate(prog.check()):
        assert c.ok, f"output #{i}: {c}"


def test_async_copies_need_a_target_that_has_them():
    """On sm_70 (no cp.async) tile-async-copy declines, and an async stage written by hand is refused at the op."""
    from irforge.target import Target, use_target

    text = SOFTMAX_TILE.replace("-> smem :", "-> smem async :")
    with use_target(Target(arch="sm_70")):
        m = parse_module(SOFTMAX_TILE)
        run_pipeline(m, "kernel(tile-async-copy)")
        assert [s.copy for s in m.walk() if isinstance(s, T.StageOp)] == ["sync"]
        with pytest.raises(IRForgeError) as e:
            run_pipeline(parse_module(text, "softmax.ir"), "tile-to-kernel")
    assert "softmax.ir:6:" in e.value.render() and "copies asynchronously, which sm_70 cannot" in e.value.render()
    m = parse_module(SOFTMAX_TILE)
    run_pipeline(m, "kernel(tile-async-copy)")
    assert [s.copy for s in m.walk() if isinstance(s, T.StageOp)] == ["async"]


SOFTMAX_TILE = """func.func @forward(%x: f32[4,256]) -> f32[4,256] {
  %y = tile.buffer f32[4,256]
  tile.kernel @k_softmax grid(4) block(64) {
    %one = scalar.const 1.0 : f32
    tile.for %a0 in 0..4 by blockIdx.x {
      %x_smem = tile.stage %x[%a0, 0] -> smem : f32[1,256]
      %m_part, %s_part = tile.reduce %r in 0..256 by threadIdx.x vector 4 online(-inf, 0.0) -> f32, f32 {
        %v = tile.load %x_smem[0, %r]
        tile.yield %v, %one
      }
      %m, %s = tile.combine online(%m_part, %s_part) over threadIdx.x : f32, f32
      tile.for %a1 in 0..256 by threadIdx.x vector 4 {
        %v = tile.load %x_smem[0, %a1]
        %d = scalar.sub %v, %m : f32
        %e = scalar.exp %d : f32
        %o = scalar.div %e, %s : f32
        tile.store %y[%a0, %a1] = %o
      }
    }
  }
  func.return %y
}
"""


def _lowered(text: str):
    m = parse_module(text)
    expected = interpret(m, seed=0)
    run_pipeline(m, "tile-to-kernel")
    assert_close(expected, interpret(m, seed=0), m, "tile-to-kernel")
    return m


def test_online_softmax_materializes_with_the_generic_combine():
    import numpy as np

    m = _lowered(SOFTMAX_TILE)
    x = np.random.default_rng(0).standard_normal((4, 256)).astype(np.float32) * 3
    (y,) = interpret(m, [x])
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    names = [op.name for op in m.walk()]
    assert names.count("kernel.shfl_xor") == 2  # max and sum, in one ladder loop over offsets 16 8 4 2 1
    (ladder,) = [op for op in m.walk() if isinstance(op, K.ForOp) and op.body.ops[0].name == "kernel.shfl_xor"]
    assert ladder.attributes.get("unroll") == 0
    assert [v.type for v in ladder.inits][-1].name == "index"
    assert names.count("kernel.barrier") == 3  # after the stage, around the partials
    loads = [op for op in m.walk() if isinstance(op, K.LoadOp)]
    assert {str(op.result.type) for op in loads} >= {"f32[4]"}  # 16-byte vectors


def test_a_combine_kernel_deals_its_points_over_the_freed_block_axis():
    """Split-K via partials with 4 x 4 register tiles (lit: lower-to-kernel/partials_spread.ir): the kernel
    simulator gives the tile interpreter's answer, and the second kernel folds 4 points a thread over 4 blocks
    along y instead of 16 points a thread in one block."""
    from pathlib import Path

    m = _lowered((Path(__file__).parent / "lit/lower-to-kernel/partials_spread.ir").read_text())
    combine = next(op for op in m.walk() if isinstance(op, K.KernelFuncOp) and op.sym_name == "k_mm_combine")
    assert (combine.attributes["grid"], combine.attributes["block"]) == ((1, 4, 1), (16, 1, 1))
    (fold,) = [op for op in combine.walk() if isinstance(op, K.ForOp)]
    assert [str(v.type) for v in fold.inits] == ["f32[4]"]


def test_online_softmax_with_masked_tiles_and_threads():
    """Causal-mask patterns: a 4-element tile all at -inf under a finite row max, a thread whose every element is
    -inf, a row with one finite element. A tile's sums are guarded once (its max at -inf), not per element."""
    import numpy as np

    m = _lowered(SOFTMAX_TILE)
    x = np.random.default_rng(1).standard_normal((4, 256)).astype(np.float32)
    x[0, :128] = -np.inf  # whole tiles and whole threads' first trips masked
    x[1, 4:8] = -np.inf  # one tile masked
    x[2, :] = -np.inf
    x[2, 255] = 0.5  # one element left
    x[3, 1::2] = -np.inf  # half of every tile
    (y,) = interpret(m, [x])
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_store_outside_distributed_loops_is_guarded_to_one_thread():
    text = """func.func @forward(%x: f32[64]) -> f32[] {
  %y = tile.buffer f32[]
  tile.kernel @k_sum grid(1) block(32) {
    %p = tile.reduce %r in 0..64 by threadIdx.x add(0.0) -> f32 {
      %v = tile.load %x[%r]
      tile.yield %v
    }
    %s = tile.combine add(%p) over threadIdx.x : f32
    tile.store %y[] = %s
  }
  func.return %y
}
"""
    m = _lowered(text)
    (store,) = [op for op in m.walk() if isinstance(op, K.StoreOp)]
    assert isinstance(store.parent_op, K.IfOp)
    assert "kernel.shfl_xor" in print_module(m) and "kernel.smem" not in print_module(m)  # one warp: no tree


def test_grid_strided_band_and_partial_last_trip():
    text = """func.func @forward(%x: f32[10,3]) -> f32[10,3] {
  %y = tile.buffer f32[10,3]
  tile.kernel @k grid(4) block(2) {
    tile.for %a, %b in 0..10, 0..3 by blockIdx.x, threadIdx.x {
      %v = tile.load %x[%a, %b]
      %e = scalar.exp %v : f32
      tile.store %y[%a, %b] = %e
    }
  }
  func.return %y
}
"""
    m = _lowered(text)
    # 30 points over 8 threads: every thread counts the 4 trips the first 6 make, unrolled, each guarded
    (loop,) = [op for op in m.walk() if isinstance(op, K.ForOp)]
    assert (loop.attributes["upper"].results[0].value, loop.attributes["step"], loop.attributes["unroll"]) == (4, 1, 0)
    (guard,) = [op for op in loop.walk() if isinstance(op, K.IfOp)]
    bound = guard.operands[0].owner
    assert bound.name == "kernel.lt" and bound.operands[1].owner.attributes["value"] == 30


SHARED_LAUNCH = """func.func @forward(%x: f32[16], %wq: f32[8,16], %wk: f32[ROWS,16]) -> (f32[8], f32[ROWS]) {
  %q = tile.buffer f32[8]
  %k = tile.buffer f32[ROWS]
  tile.kernel @k grid(4) block(4, 2) {
    tile.for %a in 0..8 by blockIdx.x, threadIdx.y {
      %s_part = tile.reduce %r in 0..16 by threadIdx.x add(0.0) -> f32 {
        %v = tile.load %x[%r]
        %w = tile.load %wq[%a, %r]
        %p = scalar.mul %v, %w : f32
        tile.yield %p
      }
      %s = tile.combine add(%s_part) over threadIdx.x : f32
      tile.store %q[%a] = %s
    }
    tile.for %b in 0..ROWS by blockIdx.x, threadIdx.y {
      %t_part = tile.reduce %r in 0..16 by threadIdx.x add(0.0) -> f32 {
        %v = tile.load %x[%r]
        %w = tile.load %wk[%b, %r]
        %p = scalar.mul %v, %w : f32
        tile.yield %p
      }
      %t = tile.combine add(%t_part) over threadIdx.x : f32
      tile.store %k[%b] = %t
    }
  }
  func.return %q, %k
}
"""


def test_a_band_sharing_a_larger_launch_combines_in_whole_blocks():
    """Two projections in one launch (loop-fuse-launches): the k band's 2 rows are dealt to the first block's two
    rows of threads, the other blocks have no point of it, so its combine's barrier is reached by all of a block's
    threads or none, and the kernel simulator gives the tile interpreter's answer. With 3 rows the second block
    would have one row of threads in the band and one out: refused, at the combine."""
    m = _lowered(SHARED_LAUNCH.replace("ROWS", "2"))
    guards = [op for op in m.walk() if isinstance(op, K.IfOp) and op.walk()]
    assert any(isinstance(x, K.BarrierOp) for g in guards for x in g.walk())
    m = parse_module(SHARED_LAUNCH.replace("ROWS", "3"), "shared.ir")
    with pytest.raises(IRForgeError) as e:
        run_pipeline(m, "tile-to-kernel")
    assert "shared.ir:" in e.value.render() and "do not split evenly" in e.value.render()


def test_unmaterializable_combines_are_refused_at_the_op():
    text = SOFTMAX_TILE.replace("block(64)", "block(48)")
    m = parse_module(text, "softmax.ir")
    with pytest.raises(IRForgeError) as e:
        run_pipeline(m, "tile-to-kernel")
    assert "softmax.ir:11:" in e.value.render() and "power of two" in e.value.render()
    from irforge.passes.tile_to_kernel.lower_to_kernel import LowerToKernel

    assert "power of two" in LowerToKernel().check(parse_module(text))[1]


def test_vectorized_index_used_as_a_value_is_a_tile_of_its_lanes():
    text = """func.func @forward(%x: f32[8]) -> f32[8] {
  %y = tile.buffer f32[8]
  tile.kernel @k grid(1) block(2) {
    tile.for %a in 0..8 by threadIdx.x vector 4 {
      %i = scalar.cast %a : index -> i64
      %f = scalar.cast %i : i64 -> f32
      tile.store %y[%a] = %f
    }
  }
  func.return %y
}
"""
    m = parse_module(text, "v.ir")
    run_pipeline(m, "tile-to-kernel")
    assert "kernel.const [0, 1, 2, 3] : index[4]" in print_module(m)
    np.testing.assert_array_equal(interpret(m)[0], np.arange(8, dtype=np.float32))


def test_kernels_read_then_write_their_buffers():
    m = parse_module(SOFTMAX_TILE)
    run_pipeline(m, "tile-to-kernel")
    (k,) = [op for op in m.walk() if isinstance(op, K.KernelFuncOp)]
    assert [a.name_hint for a in k.args] == ["x", "y"]
    assert not [op for op in m.walk() if isinstance(op, T.KernelOp)]


def _split_row_sum(rows: int, splits: int, via: str, tail: str, out: str, grid_y: int = 0, residual: bool = False):
    """A row sum over 64 columns split over `splits` blocks along y (a grid `grid_y` wide there, default `splits`),
    combined `via` partials, atomics or a cluster (as the default decides: "") into %t0, then `tail` (the
    epilogue) and the store of `out`; `residual` passes a buffer %res[rows] read by the epilogue."""
    params = f"%x: f32[{rows},64]" + (f", %res: f32[{rows}]" if residual else "")
    load = "\n      %rv = tile.load %res[%a]" if residual else ""
    return parse_module(f"""func.func @forward({params}) -> f32[{rows}] {{
  %y = tile.buffer f32[{rows}]
  tile.kernel @k grid({rows}, {grid_y or splits}) block(32) {{
    tile.for %a in 0..{rows} by blockIdx.x {{
      %p = tile.reduce %s in 0..{splits} by blockIdx.y add(0.0) -> f32 {{
        %q = tile.reduce %r in 0..{64 // splits} by threadIdx.x add(0.0) -> f32 {{
          %v = tile.load %x[%a, %s * {64 // splits} + %r]
          tile.yield %v
        }}
        %c = tile.combine add(%q) over threadIdx.x : f32
        tile.yield %c
      }}
      %t0 = tile.combine add(%p) over blockIdx.y{f" via {via}" if via else ""} : f32{load}
      {tail}
      tile.store %y[%a] = {out}
    }}
  }}
  func.return %y
}}
""")


# ---- reductions split across blocks -------------------------------------------------------------------------------
@pytest.mark.parametrize("via", ["partials", "atomics", "cluster"])
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from([(1, 2, 1), (2, 4, 1), (3, 2, 1), (2, 2, 3), (2, 8, 1)]), st.sampled_from(["", "relu", "exp"]))
def test_split_reductions_materialize_via_partials_atomics_or_a_cluster(via, shape, epilogue):
    """A row sum split over blocks (on a grid as wide or wider along y), its epilogue affine or not: atomics take
    the affine ones (the check refuses the others at the combine), partials take every one, a cluster every one
    whose blocks along y are the reduction's shares (the check refuses a wider grid); the simulator gives the tile
    interpreter's answer (through a cluster, every block of it stores the same value: the single-writer check)."""
    rows, splits, widen = shape
    tail = {"": "", "relu": "%z = scalar.const 0.0 : f32\n      %t = scalar.maximum %t0, %z : f32",
            "exp": "%t = scalar.exp %t0 : f32"}[epilogue]  # fmt: skip
    m = _split_row_sum(rows, splits, via, tail, "%t" if epilogue else "%t0", grid_y=splits * widen)
    expected = interpret(m, seed=3)
    refused = {"atomics": "not an affine function", "cluster": "not the .* that share the reduction"}
    if (via == "atomics" and epilogue) or (via == "cluster" and widen > 1):
        with pytest.raises(IRForgeError, match=refused[via]):
            run_pipeline(m, "tile-to-kernel")
        return
    run_pipeline(m, "tile-to-kernel")
    kernels = [op for op in m.body.ops if op.name == "kernel.func"]
    # partials: two kernels; atomics: the kernel and the one zeroing its output; a cluster: one
    assert len(kernels) == (1 if via == "cluster" else 2)
    if via == "cluster":
        assert kernels[0].attributes["cluster"] == (1, splits, 1)
    np.testing.assert_allclose(interpret(m, seed=3)[0], expected[0], rtol=1e-5, atol=1e-5)


# ---- reductions sliced among a block's warps ---------------------------------------------------------------------
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from([(1, 256), (2, 512), (3, 1024)]), st.sampled_from([2, 4, 8]), st.sampled_from(["sum", "softmax"])
)
def test_reductions_sliced_among_warps_fold_through_shared_memory(shape, splits, program):
    """`tile-split-reduce across=warps` on rows a block's 32 lanes share: each warp along threadIdx.y folds a
    contiguous share of the row, the warps' carriers (a sum, softmax's (max, sum)) fold through shared memory, and a
    softmax's write-back after the combine is dealt over all the block's threads; the tile interpreter and the
    kernel simulator give the loop interpreter's answer."""
    from loopgen import softmax, tensor_module

    from irforge.types import TensorType, f32

    rows, cols = shape

    def build(b, x):
        return [softmax(b, x, 1)] if program == "softmax" else [b.ew("exp", b.ew("mul", b.reduce("add", x, [1]), 0.01))]

    m = tensor_module([TensorType(f32, (rows, cols))], ["x"], build)
    run_pipeline(m, "tensor-to-loop")
    expected = interpret(m, seed=1)
    options = {"tile-cooperative-reduce": "{threads=32}", "tile-split-reduce": f"{{splits={splits} across=warps}}"}
    run_pipeline(m, ",".join(p + options.get(p, "") for p in _loop_to_tile_passes()))
    (k,) = [op for op in m.walk() if isinstance(op, T.KernelOp)]
    assert k.attributes["block"] == (32, splits, 1)
    combines = [op for op in k.walk() if isinstance(op, T.CombineOp)]
    assert [c.over for c in combines] == [("threadIdx.x",), ("threadIdx.y",)]
    np.testing.assert_allclose(interpret(m, seed=1)[0], expected[0], rtol=1e-5, atol=1e-6)
    run_pipeline(m, "tile-to-kernel")
    np.testing.assert_allclose(interpret(m, seed=1)[0], expected[0], rtol=1e-5, atol=1e-6)


def _loop_to_tile_passes() -> list[str]:
    from irforge.registry import registry

    lines = [ln.split("#")[0].strip() for ln in registry().pipelines()["loop-to-tile"].text.splitlines()]
    return [p.strip() for p in "".join(lines).split(",") if p.strip()]


def test_without_via_a_combine_takes_atomics_else_partials_and_a_cluster_only_when_asked():
    """The default: an affine epilogue goes through atomics, another through a second kernel (clusters ran slower:
    clusters.py); `via cluster` needs sm_90, at most 8 shares and room for their carriers in shared memory, and
    says so where it cannot have them."""
    from irforge.target import Target, use_target

    def kernels(splits, via, target=None):
        with use_target(target or Target()):
            m = _split_row_sum(2, splits, via, "%t = scalar.exp %t0 : f32", "%t")
            run_pipeline(m, "tile-to-kernel")
            return [op.attributes["sym_name"] for op in m.body.ops if op.name == "kernel.func"]

    assert kernels(4, "") == ["k_partial", "k_combine"]
    assert kernels(4, "cluster") == ["k"]
    with pytest.raises(IRForgeError, match="need sm_90 or later"):
        kernels(4, "cluster", Target(arch="sm_80"))
    with pytest.raises(IRForgeError, match="more than a cluster holds"):
        kernels(16, "cluster")
    # 4 blocks x 32 threads x a sum of 4 bytes: 512 bytes of shared memory for the carriers
    with pytest.raises(IRForgeError, match="take 512 bytes of shared memory, more than a block"):
        kernels(4, "cluster", Target(smem_per_block=500))
    # a second split, over z, also via a cluster: one launch has one cluster shape
    two = str(_split_row_sum(2, 4, "cluster", "", "%t0")).replace("grid(2, 4)", "grid(2, 4, 2)")
    assert "tile.store %y[%a] = %t0" in two
    two = two.replace(
        "tile.store %y[%a] = %t0",
        """%zs = tile.reduce %zz in 0..2 by blockIdx.z add(0.0) -> f32 {
        %zv = tile.load %x[%a, %zz]
        tile.yield %zv
      }
      %zt = tile.combine add(%zs) over blockIdx.z via cluster : f32
      %t = scalar.add %t0, %zt : f32
      tile.store %y[%a] = %t""",
    )
    with pytest.raises(IRForgeError, match=r"over blockIdx\.y and blockIdx\.z; a launch has one cluster shape"):
        run_pipeline(parse_module(two), "tile-to-kernel")


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from([(1, 2), (2, 4), (3, 2)]), st.sampled_from(["add", "sub", "scaled"]))
def test_atomic_shares_add_the_constant_part_once_in_the_first_block(shape, epilogue):
    """A split row sum with an affine epilogue whose constant part reads a buffer (a residual: s + r, r - s,
    2 s + r): every block adds its coef * partial, and the first block of the split axis then adds the constant
    part, whose loads run in that block's branch only; the simulator gives the tile interpreter's answer."""
    rows, splits = shape
    tail = {"add": "%t = scalar.add %t0, %rv : f32", "sub": "%t = scalar.sub %rv, %t0 : f32",
            "scaled": "%two = scalar.const 2.0 : f32\n      %t1 = scalar.mul %t0, %two : f32\n"
                      "      %t = scalar.add %t1, %rv : f32"}[epilogue]  # fmt: skip
    m = _split_row_sum(rows, splits, "atomics", tail, "%t", residual=True)
    expected = interpret(m, seed=3)
    run_pipeline(m, "tile-to-kernel")
    (k,) = [op for op in m.walk() if isinstance(op, K.KernelFuncOp) and op.attributes["sym_name"] == "k"]
    (load,) = [op for op in k.walk() if isinstance(op, K.LoadOp) and op.operands[0].name_hint == "res"]
    assert isinstance(load.parent_op, K.IfOp), "the residual is read outside the first block's branch"
    assert len([op for op in k.walk() if isinstance(op, K.AtomicOp)]) == 2
    np.testing.assert_allclose(interpret(m, seed=3)[0], expected[0], rtol=1e-5, atol=1e-5)


def test_a_constant_part_used_elsewhere_is_recomputed_in_the_branch():
    """The residual also feeds a second output, lowered after the atomic store: its load stays where it was for
    that output (the branch reads its own copy), and both outputs match the interpreter through the simulator."""
    text = """func.func @forward(%x: f32[2,64], %res: f32[2]) -> (f32[2], f32[2]) {
  %y = tile.buffer f32[2]
  %z = tile.buffer f32[2]
  tile.kernel @k grid(2, 2) block(32) {
    tile.for %a in 0..2 by blockIdx.x {
      %p = tile.reduce %s in 0..2 by blockIdx.y add(0.0) -> f32 {
        %q = tile.reduce %r in 0..32 by threadIdx.x add(0.0) -> f32 {
          %v = tile.load %x[%a, %s * 32 + %r]
          tile.yield %v
        }
        %c = tile.combine add(%q) over threadIdx.x : f32
        tile.yield %c
      }
      %t0 = tile.combine add(%p) over blockIdx.y via atomics : f32
      %rv = tile.load %res[%a]
      %t = scalar.add %t0, %rv : f32
      tile.store %y[%a] = %t
      %two = scalar.const 2.0 : f32
      %u = scalar.mul %rv, %two : f32
      tile.store %z[%a] = %u
    }
  }
  func.return %y, %z
}
"""
    m = parse_module(text)
    expected = interpret(m, seed=3)
    run_pipeline(m, "tile-to-kernel")
    loads = [op for op in m.walk() if isinstance(op, K.LoadOp) and op.operands[0].name_hint == "res"]
    assert sorted(isinstance(ld.parent_op, K.IfOp) for ld in loads) == [False, True]
    for got, want in zip(interpret(m, seed=3), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_staged_ring_run_again_by_each_thread_waits_for_the_last_reads():
    """RMSNorm feeding two projections, fused into one kernel whose threads each loop over their row's outputs,
    streaming K through a ring of 3 staged chunks for every output: the next output's prologue refills slot 1,
    which the last trip reads after its last barrier. The simulator reported the race before the prologue took a
    barrier (on an H100 a decoder layer's fused q/k/v projections ran 10% wrong on some runs)."""
    import torch

    from irforge.compiler import compile as compile_model

    class NormProjections(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.RMSNorm(128)
            self.q = torch.nn.Linear(128, 32, bias=False)
            self.k = torch.nn.Linear(128, 16, bias=False)

        def forward(self, x):
            h = self.norm(x)
            return self.q(h), self.k(h)

    torch.manual_seed(0)
    prog = compile_model(NormProjections(), torch.randn(1, 2, 128), ir="kernel")
    rings = [s for s in prog.module.walk() if s.name == "kernel.smem" and s.results[0].type.shape[0] == 3]
    assert len(rings) == 4  # each projection's weight and the norm's, 3 slots each
    assert all(c.ok for c in prog.check())


def test_linear_forms_keep_their_terms_in_order():
    """A mask's bounds are linear forms over loop indices, printed in their terms' order: the order in which the
    operands name them, not a set's (which followed the values' ids, so the same program printed differently from
    run to run)."""
    from irforge.dialects.tile.algebra import index_form

    m = parse_module("""func.func @f(%x: f32[4,4,4,4]) -> f32[4,4,4,4] {
  %y = tile.buffer f32[4,4,4,4]
  tile.kernel @k grid(1) block(1) {
    tile.for %a, %b, %c, %d in 0..4, 0..4, 0..4, 0..4 {
      %s = scalar.sub %d, %a : index
      %t = scalar.add %c, %s : index
      %u = scalar.sub %t, %b : index
      %v = tile.load %x[%a, %b, %c, %d]
      tile.store %y[%a, %b, %c, %d] = %v
    }
  }
  func.return %y
}""")
    (u,) = [op for op in m.walk() if op.name == "scalar.sub" and op.operands[1].name_hint == "b"]
    a, b, c, d = u.parent_op.ivs
    assert list(index_form(u.result).items()) == [(c, 1), (d, 1), (a, -1), (b, -1)]


def test_row_carriers_of_split_attention_in_strided_columns_are_stored_without_a_race():
    """Causal attention on the SIMT path without lanes (`tile-register-tile{tn=1}`: each of a row's 4 threads takes
    4 of its 16 columns in strided trips), split over blocks and combined through partials: the row's max and sum,
    alike for the row's threads, were stored by all of them into one element (the kernel simulator reported the
    race; a random point of the tuner's space found it). They keep the column dimension now, and the simulator
    gives the loop interpreter's answer."""
    from irforge import frontend
    from irforge.compiler import compile_program
    from irforge.tune.space import set_tune

    snippet = (
        "import torch.nn.functional as F; q = torch.randn(1, 2, 32, 16, dtype=torch.bfloat16); "
        "k = torch.randn(1, 1, 32, 16, dtype=torch.bfloat16); "
        "F.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True)"
    )
    module = compile_program(frontend.from_snippet(snippet), "loop").module
    expected = interpret(module, seed=7)
    set_tune(module, {"tile-register-tile": {"tn": 1}})
    run_pipeline(module, "loop-to-tile")
    text = print_module(module)
    assert "by blockIdx.y" in text, text  # split over blocks
    run_pipeline(module, "tile-to-kernel")
    assert [k.attributes["sym_name"] for k in module.walk() if isinstance(k, K.KernelFuncOp)] == [
        "k_scaled_dot_product_attention_partial",
        "k_scaled_dot_product_attention_combine",
    ], text
    assert_close(expected, interpret(module, seed=7), module, f"kernel:\n{text}")
