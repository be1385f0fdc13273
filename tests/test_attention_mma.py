"""Attention of 16-bit factors on mma.sync atoms (tile-tensorize's attention layout, lower-to-kernel's
`flash.py`): the default schedule lays prefill attention out on the atoms, the tile interpreter after every pass of
`loop-to-tile` and the kernel simulator (which runs the atoms' fragment layouts lane by lane) agree with the loop
interpreter on random shapes, GQA groups and causal masks, and each kernel compiles for sm_90a without spills."""

from __future__ import annotations

import loopgen
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from irforge.dialects import tile as T
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel import warpgroup as WG
from irforge.dialects.tile import fragments

from irforge.interpreter import interpret
from irforge.pass_manager import run_pipeline
from irforge.registry import registry
from irforge.testing import compare_outputs, output_types
from irforge.types import bf16, f16


def _passes(name: str) -> list[str]:
    lines = [ln.split("#")[0].strip() for ln in registry().pipelines()[name].text.splitlines()]
    return [p.strip() for p in "".join(lines).split(",") if p.strip()]


def _matches(reference, module, what: str) -> None:
    for i, c in enumerate(compare_outputs(interpret(module, seed=0), reference, output_types(module))):
        assert c.ok, f"{what}: output #{i}: {c}"


def _through_loop_to_tile(m):
    """Lower `m` to the loop level, then through each pass of `loop-to-tile`, the tile interpreter matching the
    loop interpreter after every one that changed the program (one that changed nothing cannot change the answer);
    the loop interpreter's outputs."""
    from irforge.printer import print_module

    run_pipeline(m, "tensor-to-loop")
    reference = interpret(m, seed=0)
    for p in _passes("loop-to-tile"):
        before = print_module(m)
        run_pipeline(m, p)
        if print_module(m) != before:
            _matches(reference, m, f"after {p}")
    return reference


def _on_atoms(module, family: str | None = None) -> list[T.ForOp]:
    """The loops laid out on tensor-core atoms (of `family`, or either) whose contraction is attention."""
    return [
        lp
        for lp in module.walk()
        if isinstance(lp, T.ForOp)
        and "atom" in lp.attributes
        and fragments.Atom.parse(lp.attributes["atom"]).family in ((family,) if family else ("mma", "wgmma"))
        and isinstance(fragments.any_operands(lp, *lp.ivs), fragments.AttentionOperands)
    ]


def _factor_types(module) -> set:
    """The element types the kernels' tensor-core instructions multiply (mma.sync's and wgmma's)."""
    return {op.operands[0].type.dtype for op in module.walk() if isinstance(op, (K.MmaOp, WG.WgmmaOp))}


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    dtype=st.sampled_from([bf16, f16]),
    kv_heads=st.integers(1, 2),
    group=st.sampled_from([1, 2]),
    queries=st.sampled_from([64, 128]),
    keys=st.sampled_from([16, 48, 64, 128, 256]),
    e=st.sampled_from([16, 32]),
    ev=st.sampled_from([16, 32]),
    mask=st.sampled_from(["none", "causal"]),
    scale=st.sampled_from([1.0, 0.25]),
)
def test_attention_on_mma_atoms_matches_the_loop_interpreter(dtype, kv_heads, group, queries, keys, e, ev, mask, scale):
    if mask == "causal":
        keys = queries  # SDPA's causal mask with as many keys as queries
    m = loopgen.attention_module(
        batch=1, kv_heads=kv_heads, group=group, queries=queries, keys=keys, e=e, ev=ev, mask=mask, scale=scale,
        dtype=dtype,
    )  # fmt: skip
    reference = _through_loop_to_tile(m)
    assert _on_atoms(m), "the default schedule lays prefill attention of 16-bit factors out on tensor-core atoms"
    run_pipeline(m, "tile-to-kernel")
    assert _factor_types(m) == {dtype}  # both products, exp(x - m) in the factors' type
    _matches(reference, m, "after tile-to-kernel (kernel simulator)")


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    dtype=st.sampled_from([bf16, f16]),
    group=st.sampled_from([1, 2]),
    chunks=st.integers(2, 3),
    e=st.sampled_from([16, 32, 64, 128]),
    ev=st.sampled_from([16, 32, 64, 128]),
    mask=st.sampled_from(["none", "causal"]),
)
@example(dtype=bf16, group=2, chunks=2, e=64, ev=64, mask="causal")
@example(dtype=bf16, group=1, chunks=2, e=128, ev=128, mask="none")
def test_attention_on_wgmma_matches_the_loop_interpreter(dtype, group, chunks, e, ev, mask):
    """On sm_90a the default schedule runs both products on wgmma where V's rows are one swizzle span or whole
    128-byte spans (a head dimension of 128 in 16 bits: K and V stored in blocks of 64 columns) and the keys come in
    chunks (the slabs then ring, copied by the tensor memory accelerator): Q and exp(x - m) from registers, K and V
    (MN-major) through descriptors, no mma.sync left; the kernel simulator agrees with the loop interpreter."""
    keys = 128 * chunks
    m = loopgen.attention_module(
        batch=1, kv_heads=1, group=group, queries=keys if mask == "causal" else 64, keys=keys, e=e, ev=ev, mask=mask,
        scale=0.25, dtype=dtype,
    )  # fmt: skip
    run_pipeline(m, "tensor-to-loop")
    reference = interpret(m, seed=0)
    run_pipeline(m, "loop-to-tile")
    assert _on_atoms(m, "wgmma")
    run_pipeline(m, "tile-to-kernel")
    wgmmas = [op for op in m.walk() if isinstance(op, WG.WgmmaOp)]
    assert {op.registers_a for op in wgmmas} == {True}  # Q and exp(x - m)
    assert {"transpose" in op.attributes for op in wgmmas} == {False, True}  # K-major K, MN-major V
    assert not any(isinstance(op, K.MmaOp) for op in m.walk()) and _factor_types(m) == {dtype}
    _matches(reference, m, "after tile-to-kernel (kernel simulator)")


def test_causal_chunks_past_the_diagonal_are_not_walked():
    """The loop over key chunks runs to the last chunk the causal mask leaves an element of (`masked.chunk_trips`):
    its trip count is a value counted before it (the first block of 128 queries walks 1 chunk of the 4), not the
    static extent, and the simulator agrees with the loop interpreter."""
    import re

    from irforge.printer import print_module

    m = loopgen.attention_module(
        batch=1, kv_heads=1, group=1, queries=512, keys=512, e=16, ev=16, mask="causal", dtype=bf16
    )
    run_pipeline(m, "tensor-to-loop")
    reference = interpret(m, seed=0)
    run_pipeline(m, "loop-to-tile,tile-to-kernel")
    text = print_module(m)
    (bound,) = re.findall(r"kernel.for %r\w* in 0 \.\. %(\w+) carry", text)
    assert re.search(rf"%{bound} = kernel.for %t in 0 \.\. 4 carry", text), text
    _matches(reference, m, "after tile-to-kernel (kernel simulator)")


@pytest.mark.parametrize("slope", [1 / 16, -1 / 16])
def test_a_row_max_that_leaps_in_a_later_chunk_rescales_the_carrier(slope):
    """flash.py keeps a row's key while its scores stay within the online carrier's slack (exp(x - k) at most 256)
    and rescales O only where a row's max leaps past it. Scores that grow by 64 a chunk of 64 keys take the
    rescaling branch in every chunk, scores that fall take it in the first only; both match the loop interpreter."""
    import numpy as np

    m = loopgen.attention_module(batch=1, kv_heads=1, group=1, queries=64, keys=128, e=16, ev=16, dtype=bf16)
    run_pipeline(m, "tensor-to-loop")
    rng = np.random.default_rng(0)
    k = np.broadcast_to(slope * np.arange(128.0)[:, None], (1, 1, 128, 16))  # score of key j: 16 * slope * j
    inputs = [np.ones((1, 1, 64, 16)), k, rng.standard_normal((1, 1, 128, 16)), np.zeros((64, 128))]
    inputs = [x.astype(np.float32) for x in inputs]
    reference = interpret(m, inputs)
    run_pipeline(m, "loop-to-tile")
    assert _on_atoms(m)
    run_pipeline(m, "tile-to-kernel")
    assert any(op.results and op.results[0].name_hint == "leaps" for op in m.walk())
    for i, c in enumerate(compare_outputs(interpret(m, inputs), reference, output_types(m))):
        assert c.ok, f"output #{i}: {c}"


@pytest.mark.parametrize("head_dim", [64, 128])
def test_prefill_attention_on_atoms_compiles_without_spills(head_dim):
    """The llm suite's prefill shapes (F1: head dimension 64, F3: 128) at a shorter length: one kernel on wgmma
    atoms, a warpgroup of 16 query rows a warp, K and V of the wider head stored in blocks of 64 columns, no
    register spills for sm_90a."""
    from irforge.dialects.cuda import ops as C

    from irforge.runtime.nvrtc import resource_usage

    m = loopgen.attention_module(
        batch=1, kv_heads=2, group=4, queries=256, keys=256, e=head_dim, ev=head_dim, mask="causal", dtype=bf16,
        scale=head_dim**-0.5,
    )  # fmt: skip
    run_pipeline(m, "tensor-to-loop,loop-to-tile")
    (loop,) = _on_atoms(m, "wgmma")
    assert loop.attributes["warps"] == (4, 1) and loop.extents == (64, head_dim)
    blocked = {st.attributes.get("columns") for st in m.walk() if isinstance(st, T.StageOp) and st.copy == "tma"}
    assert blocked == ({64} if head_dim > 64 else {None})
    run_pipeline(m, "tile-to-kernel,kernel-to-cuda")
    (k,) = [op for op in m.body.ops if isinstance(op, C.CudaKernelOp)]
    usage = resource_usage(k.attributes["source"], k.attributes["sym_name"], arch="sm_90a")
    assert not any(u.spills for u in usage.values()), usage


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    dtype=st.sampled_from([bf16, f16]),
    batch=st.integers(1, 2),
    kv_heads=st.integers(1, 2),
    group=st.sampled_from([4, 7, 8]),
    keys=st.sampled_from([64, 128, 512]),
    e=st.sampled_from([16, 64]),
)
@example(bf16, 1, 1, 7, 512, 64)
def test_decode_attention_runs_on_the_atoms_top_halves(dtype, batch, kv_heads, group, keys, e):
    """A decode step (one query a head, a GQA group of 4 to 8 heads a KV head): the default schedule puts the
    group's rows on one warp's mma atoms (their top halves: `dialects/kernel/fragments.py`; the lanes of rows past
    the group's, ghosts, take part in the mma and store nothing), its keys split over blocks where they are many;
    the tile interpreter after every pass and the kernel simulator agree with the loop interpreter, and the
    kernels compile for sm_90a without spills."""
    from irforge.dialects.cuda import ops as C

    from irforge.runtime.nvrtc import resource_usage

    m = loopgen.attention_module(
        batch=batch, kv_heads=kv_heads, group=group, queries=1, keys=keys, e=e, ev=e, scale=e**-0.5,
        dtype=dtype,
    )  # fmt: skip
    reference = _through_loop_to_tile(m)
    (loop,) = _on_atoms(m)
    assert loop.extents == (group, e) and loop.attributes["warps"] == (1, 1)
    split = any(isinstance(r, T.ReduceOp) and r.bind == ("blockIdx.y",) for r in m.walk())
    assert split == (keys >= 512), "a long cache's keys are shared out among blocks"
    run_pipeline(m, "tile-to-kernel")
    assert {op.operands[0].type.shape for op in m.walk() if isinstance(op, K.MmaOp)} == {(8, 16)}
    _matches(reference, m, "after tile-to-kernel (kernel simulator)")
    run_pipeline(m, "kernel-to-cuda")
    for k in (op for op in m.body.ops if isinstance(op, C.CudaKernelOp)):
        usage = resource_usage(k.attributes["source"], k.attributes["sym_name"], arch="sm_90a")
        assert not any(u.spills for u in usage.values()), usage


@pytest.mark.parametrize("dtype, group", [(bf16, 8), (f16, 4)])
def test_split_decode_attention_folds_through_a_cluster_when_asked(dtype, group):
    """`tile-split-reduce{via=cluster}`: a decode step whose cache is split over blocks runs as one kernel launched
    in clusters of the split's blocks, which fold their (m, l, O) carriers (mma accumulators) through distributed
    shared memory; the kernel simulator (every block stores the same rows: the single-writer check) agrees with
    the loop interpreter, and the kernel compiles for sm_90a without spills."""
    from irforge.dialects.cuda import ops as C

    from irforge.runtime.nvrtc import resource_usage

    m = loopgen.attention_module(
        batch=1, kv_heads=2, group=group, queries=1, keys=512, e=64, ev=64, scale=0.125, dtype=dtype
    )
    run_pipeline(m, "tensor-to-loop")
    reference = interpret(m, seed=0)
    passes = ["tile-split-reduce{via=cluster}" if p == "tile-split-reduce" else p for p in _passes("loop-to-tile")]
    run_pipeline(m, ",".join(passes))
    run_pipeline(m, "tile-to-kernel")
    (k,) = [op for op in m.body.ops if isinstance(op, K.KernelFuncOp)]
    shares = k.attributes["grid"][1]
    assert shares > 1 and k.attributes["cluster"] == (1, shares, 1)
    _matches(reference, m, "after tile-to-kernel (kernel simulator)")
    run_pipeline(m, "kernel-to-cuda")
    (ck,) = [op for op in m.body.ops if isinstance(op, C.CudaKernelOp)]
    assert "__cluster_dims__(1, " in ck.attributes["source"]
    usage = resource_usage(ck.attributes["source"], ck.attributes["sym_name"], arch="sm_90a")
    assert not any(u.spills for u in usage.values()), usage


@pytest.mark.parametrize("dtype, group, splits", [(bf16, 8, 4), (f16, 4, 2)])
def test_decode_attention_sliced_among_warps_matches_the_loop_interpreter(dtype, group, splits):
    """`tile-split-reduce{across=warps}`: a decode step's cache is shared among a block's warps (each takes every
    `splits`-th chunk of the staged slab, so the block still stages one slab a trip) and their (m, l, O) carriers
    (mma accumulators) fold through shared memory in the kernel itself: one kernel, one block per head, and the
    kernel simulator agrees with the loop interpreter; the kernel compiles for sm_90a without spills."""
    from irforge.dialects.cuda import ops as C

    from irforge.runtime.nvrtc import resource_usage

    m = loopgen.attention_module(
        batch=1, kv_heads=2, group=group, queries=1, keys=512, e=64, ev=64, scale=0.125, dtype=dtype
    )
    run_pipeline(m, "tensor-to-loop")
    reference = interpret(m, seed=0)
    option = f"tile-split-reduce{{splits={splits} across=warps}}"
    passes = [option if p == "tile-split-reduce" else p for p in _passes("loop-to-tile")]
    run_pipeline(m, ",".join(passes))
    run_pipeline(m, "tile-to-kernel")
    (k,) = [op for op in m.body.ops if isinstance(op, K.KernelFuncOp)]
    assert k.attributes["block"] == (32, splits, 1) and k.attributes["grid"][1:] == (1, 1)
    _matches(reference, m, "after tile-to-kernel (kernel simulator)")
    run_pipeline(m, "kernel-to-cuda")
    (ck,) = [op for op in m.body.ops if isinstance(op, C.CudaKernelOp)]
    usage = resource_usage(ck.attributes["source"], ck.attributes["sym_name"], arch="sm_90a")
    assert not any(u.spills for u in usage.values()), usage


def _on_atoms_staging(stage_options: str, **shape):
    """Attention (bf16, `loopgen.attention_module` of `shape`) through loop-to-tile with `tile-stage-inputs` given
    `stage_options`, laid out on atoms; with the loop interpreter's outputs and the names of the staged buffers."""
    m = loopgen.attention_module(scale=0.125, dtype=bf16, **shape)
    run_pipeline(m, "tensor-to-loop")
    reference = interpret(m, seed=0)
    passes = [
        f"tile-stage-inputs{{{stage_options}}}" if p == "tile-stage-inputs" else p for p in _passes("loop-to-tile")
    ]
    run_pipeline(m, ",".join(passes))
    assert len(_on_atoms(m)) == 1
    return m, reference, {op.source.name_hint for op in m.walk() if isinstance(op, T.StageOp)}


@pytest.mark.parametrize("queries, mask", [(1, "none"), (64, "causal")])
def test_attention_on_atoms_with_keys_and_values_left_in_memory(queries, mask):
    """A stage budget too small for the K and V slabs (`tile-stage-inputs{max-bytes=4096}`) leaves the tensorized
    attention reading K and V from global memory: lower-to-kernel still finds its two products (the scores'
    reduction then also reads as a contraction over the block's indices, and is not taken for a second product),
    and the kernel simulator agrees with the loop interpreter."""
    shape = dict(batch=2, kv_heads=2, group=4, queries=queries, keys=128, e=64, ev=64, mask=mask)
    m, reference, staged = _on_atoms_staging("max-bytes=4096", **shape)
    assert not staged & {"k", "v"}, staged
    run_pipeline(m, "tile-to-kernel")
    assert any(isinstance(op, (K.MmaOp, WG.WgmmaOp)) for op in m.walk())
    _matches(reference, m, "after tile-to-kernel (kernel simulator)")


def test_decode_attention_with_ghost_rows_reads_its_queries_from_memory():
    """A GQA group of 7 query heads at decode (the atoms' top halves: 8 rows, one a ghost row) with only K staged
    (`tile-stage-inputs{inputs=k}`): Q's fragments are loaded from global memory, the ghost row reading the last
    real one as on the staged path; lower-to-kernel stopped on an assertion before (random points of the tuner's
    space found it). The kernel simulator agrees with the loop interpreter."""
    shape = dict(batch=2, kv_heads=1, group=7, queries=1, keys=128, e=32, ev=32, mask="none")
    m, reference, staged = _on_atoms_staging("inputs=k", **shape)
    assert "q" not in staged, staged
    run_pipeline(m, "tile-to-kernel")
    assert any(op.name == "kernel.frag_load" and op.attributes.get("rows") == 7 for op in m.walk())
    _matches(reference, m, "after tile-to-kernel (kernel simulator)")
