"""Contractions on tensor cores: `tile-tensorize` keeps the answer (the tile interpreter against the loop
interpreter), and the materialized fragments (ldmatrix, mma.sync) compute it element by element in the kernel
simulator, in f16 and bf16, with prologues, epilogues, batch dimensions, transposes, K chunks, split-K and staged,
multi-buffered, asynchronous slabs; the emitted kernels compile for sm_80 and sm_90a without spills; the pass
declines what it cannot take and the heuristics leave decode-shaped products on the SIMT path."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, event, example, given, settings
from hypothesis import strategies as st
from irforge.dialects import tile as T
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel import warpgroup as WG
from irforge.dialects.tile import fragments
from loopgen import contraction_programs
from tilegen import assert_close, runs_somewhere, schedule

from irforge.interpreter import interpret
from irforge.pass_manager import run_pipeline
from irforge.printer import print_module
from irforge.runtime.nvrtc import resource_usage
from irforge.target import Target, use_target
from irforge.types import bf16, f16

# After map-to-tile: a block tile that warps can share, then the tensor cores, then any of the later passes.
BLOCKS = [
    "{bm=16 bn=16 threads=32}",
    "{bm=16 bn=16 threads=64}",
    "{bm=32 bn=16 threads=64}",
    "{bm=32 bn=32 threads=128}",
]
LATER = {
    "tile-chunk-reduce": ["{bk=16}", "{bk=32}", "{bk=8}"],
    "tile-split-reduce": ["{splits=2}", "{splits=2 via=partials}", "{splits=3}"],
    "tile-vectorize": [""],
    "tile-stage-inputs": [""],
    "tile-multi-buffer": ["{stages=2}", "{stages=3}"],
    "tile-async-copy": [""],
    "tile-pipeline": [""],
}


@st.composite
def tensor_core_schedules(draw):
    later = [p + draw(st.sampled_from(LATER[p])) for p in LATER if draw(st.booleans())]
    return ["tile-blockify" + draw(st.sampled_from(BLOCKS)), "tile-tensorize{atom=mma}", *later]


HALF = st.sampled_from((16, 32))


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(contraction_programs(dims=HALF, ks=st.sampled_from((16, 32, 48))), tensor_core_schedules())
def test_tensor_core_contractions_match_the_loop_interpreter(module, passes):
    run_pipeline(module, "tensor-to-loop")
    assume(runs_somewhere(module))
    expected = interpret(module, seed=3)
    assume(schedule(module, passes) is None)
    text = print_module(module)
    assert_close(expected, interpret(module, seed=3), module, f"tile, {passes}:\n{text}")
    tensorized = [lp for lp in module.walk() if isinstance(lp, T.ForOp) and "atom" in lp.attributes]
    event(f"on tensor cores: {bool(tensorized)}")
    run_pipeline(module, "tile-to-kernel")
    assert_close(expected, interpret(module, seed=3), module, f"kernel, {passes}:\n{text}")
    names = {op.name for op in module.walk()}
    assert ("kernel.mma" in names) == bool(tensorized), text
    staged = "tile.stage" in text
    if tensorized and staged and "tile-chunk-reduce{bk=8}" not in passes:
        assert "kernel.ldmatrix" in names, text


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype", [bf16, f16])
def test_a_linear_layer_on_mma_compiles_without_spills(dtype, arch, tmp_path, monkeypatch):
    """The default pipeline on nn.Linear's product (512 x 2048 by a 2560 x 2048 weight), scheduled for `arch`:
    tensorized (wgmma on sm_90a, mma.sync fed by ldmatrix on sm_80), its kernels compile for that arch with no
    stack frame and no spills."""
    from irforge.parser import parse_module

    monkeypatch.setenv("IRFORGE_CACHE_DIR", str(tmp_path))
    with use_target(Target(arch=arch)):
        m = parse_module(_linear(512, 2560, 2048, dtype.name))
        run_pipeline(m, "loop-to-tile")
        assert any("atom" in lp.attributes for lp in m.walk() if isinstance(lp, T.ForOp)), print_module(m)
        run_pipeline(m, "tile-to-kernel")
        want = WG.WgmmaOp if arch == "sm_90a" else K.LdmatrixOp
        assert any(isinstance(op, want) for op in m.walk())
        run_pipeline(m, "kernel-to-cuda")
    for k in (op for op in m.body.ops if op.name == "cuda.kernel"):
        for name, use in resource_usage(k.attributes["source"], k.attributes["sym_name"], arch=arch).items():
            assert use.stack_frame == 0, (arch, name, use)


@pytest.mark.parametrize("dtype", [bf16, f16])
def test_the_heuristics_pick_the_path_per_shape(dtype):
    """Products of fewer than 16 rows (decode) stay GEMVs on the SIMT path: the weight's rows shared by a block's
    threads in 16-byte vectors, split over blocks where the rows are few. From 16 rows (the tensor cores' atom; at
    2 * M flops per weight byte the SIMT path would be compute-bound from about 20 rows) the product is
    tensorized, split over K where its blocks are few; a target without mma.sync keeps every shape on SIMT."""
    from irforge.parser import parse_module

    def scheduled(m_rows, n, k, target=None):
        with use_target(target or Target()):
            m = parse_module(_linear(m_rows, n, k, dtype.name))
            run_pipeline(m, "loop-to-tile")
        return m

    for rows, n, k in ((1, 2560, 2048), (8, 2560, 2048), (1, 3584, 18944)):
        m = scheduled(rows, n, k)
        assert not any("atom" in lp.attributes for lp in m.walk() if isinstance(lp, T.ForOp)), rows
        weight = [ld for ld in m.walk() if isinstance(ld, T.LoadOp) and ld.operands[0].name_hint.startswith("w")]
        assert weight and all(ld.parent_op.vector * dtype.bytes == 16 for ld in weight), print_module(m)
    for rows in (16, 32):
        m = scheduled(rows, 3584, 18944)
        (loop,) = [lp for lp in m.walk() if isinstance(lp, T.ForOp) and "atom" in lp.attributes]
        assert loop.extents[0] == rows
        assert any(
            isinstance(c, T.CombineOp) and any(a in T.BLOCK_AXES for a in c.attributes["over"]) for c in m.walk()
        )
    m = scheduled(512, 2560, 2048, Target(arch="sm_75"))
    assert not any("atom" in lp.attributes for lp in m.walk() if isinstance(lp, T.ForOp))


def _linear(m: int, n: int, k: int, dtype: str, bias=False, a_t=False, prologue=False) -> str:
    """nn.Linear's product at the loop level (x [m, k], or [k, m] when `a_t`; the weight [n, k]), with a bias
    and a prologue on x (doubled) when asked."""
    x_shape, x_at = (f"{k},{m}", "%r, %a0") if a_t else (f"{m},{k}", "%a0, %r")
    args = f"%x: {dtype}[{x_shape}], %w: {dtype}[{n},{k}]" + (f", %bias: {dtype}[{n}]" if bias else "")
    doubled = f"%two = scalar.const 2.0 : {dtype}\n          %a2 = scalar.mul %a, %two : {dtype}" if prologue else ""
    out = (
        f"%bv = loop.load %bias[%a1]\n        %o = scalar.add %o0, %bv : {dtype}"
        if bias
        else "%o = scalar.add %o0, %o0 : {dtype}"
    )
    return f"""func.func @forward({args}) -> {dtype}[{m},{n}] {{
  %y = loop.buffer {dtype}[{m},{n}]
  loop.kernel @k_linear {{
    loop.for %a0 in 0..{m} {{
      loop.for %a1 in 0..{n} {{
        %s = loop.reduce %r in 0..{k} add(0.0) -> f32 {{
          %a = loop.load %x[{x_at}]
          {doubled}
          %a32 = scalar.cast {"%a2" if prologue else "%a"} : {dtype} -> f32
          %b = loop.load %w[%a1, %r]
          %b32 = scalar.cast %b : {dtype} -> f32
          %p = scalar.mul %a32, %b32 : f32
          loop.yield %p
        }}
        %o0 = scalar.cast %s : f32 -> {dtype}
        {out if bias else "%o = scalar.add %o0, %o0 : " + dtype}
        loop.store %y[%a0, %a1] = %o
      }}
    }}
  }}
  func.return %y
}}
"""


def test_fragment_layout_is_the_register_tile_of_the_thread():
    """An accumulator's lane elements, row-major over the lane's points, are the points the tile loop's layout
    gives the thread, in the same order (so the reshape between them is free)."""
    from irforge.dialects.kernel.types import FragType
    from irforge.dialects.tile.fragments import acc_layout

    for extents, warps in (((64, 64), (2, 2)), ((32, 16), (2, 1)), ((128, 256), (8, 1)), ((8, 64), (1, 1))):
        layout = acc_layout(extents, warps)
        tile = tuple(e // w for e, w in zip(extents, warps))
        frag = FragType("acc", bf16, tile)
        for unit in range(layout.work_items):
            warp, lane = divmod(unit, 32)
            coords = layout.work_coords(unit)
            pts = [
                (layout.index(0, coords[0], i), layout.index(1, coords[1], j))
                for i in range(layout.vector[0])
                for j in range(layout.vector[1])
            ]
            w0, w1 = divmod(warp, warps[1])
            want = [(w0 * tile[0] + r, w1 * tile[1] + c) for r, c in frag.points(lane // 4, lane % 4)]
            assert pts == want, (extents, warps, unit)


EPILOGUES = {
    "bias": "lin=nn.Linear(64,32).to(d); lin(x)",
    "residual": "lin=nn.Linear(64,32,bias=False).to(d); r=torch.randn(32,32,dtype=d); lin(x) + r",
    "silu_up": "g=nn.Linear(64,32,bias=False).to(d); u=nn.Linear(64,32,bias=False).to(d); F.silu(g(x)) * u(x)",
}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("epilogue", list(EPILOGUES))
def test_linear_layers_with_epilogues_on_mma_match_eager(dtype, epilogue):
    """nn.Linear in f16 and bf16 through the default pipeline, 32 x 32 outputs over K = 64, with its epilogue
    (bias, residual add, SiLU(gate) * up: two contractions of one kernel) fused into the tensor-core kernel: the
    contraction is tensorized and fed by ldmatrix, the output stored in vectors of the accumulator's column pairs,
    and the kernel simulator matches PyTorch eager."""

    from irforge import frontend
    from irforge.compiler import compile_program

    code = f"d=torch.{dtype}; x=torch.randn(32,64,dtype=d); " + EPILOGUES[epilogue]
    prog = compile_program(frontend.from_snippet(code), "kernel")
    (k,) = [op for op in prog.module.walk() if isinstance(op, K.KernelFuncOp) and any(
        isinstance(x, K.MmaOp) for x in op.walk())]  # fmt: skip
    assert any(isinstance(x, K.LdmatrixOp) for x in k.walk())
    stores = [x for x in k.walk() if isinstance(x, K.StoreOp)]
    assert stores and all(x.value.type.shape[-1:] == (2,) for x in stores), [x.value.type for x in stores]
    for i, c in enumerate(prog.check()):
        assert c.ok, f"output #{i}: {c}"


MMA_SLABS = [
    [],
    [
        "tile-chunk-reduce{bk=16}",
        "tile-stage-inputs",
        "tile-multi-buffer{stages=2}",
        "tile-async-copy",
        "tile-pipeline",
    ],
    ["tile-chunk-reduce{bk=32}", "tile-split-reduce{splits=3}", "tile-stage-inputs", "tile-multi-buffer{stages=2}"],
]


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("later", MMA_SLABS, ids=["registers", "async_ring", "split_k"])
def test_mma_sync_in_each_half_type_matches_the_loop_interpreter(dtype, later):
    """The same nn.Linear product (32 x 32 outputs over K = 96, with a bias) on mma.sync in f16 and in bf16, read
    from global memory or from staged slabs (ldmatrix), in an asynchronous ring, split over K: the kernel simulator
    gives the loop interpreter's answer in both types (the hypothesis test above draws the type; this pins each)."""
    from irforge.parser import parse_module

    module = parse_module(_linear(32, 32, 96, dtype, bias=True))
    expected = interpret(module, seed=7)
    passes = ["tile-blockify{bm=32 bn=32 threads=128}", "tile-tensorize{atom=mma}", *later]
    assert schedule(module, passes) is None
    text = print_module(module)
    assert any(isinstance(lp, T.ForOp) and "atom" in lp.attributes for lp in module.walk()), text
    run_pipeline(module, "tile-to-kernel")
    assert_close(expected, interpret(module, seed=7), module, f"kernel, {passes}:\n{text}")
    mmas = [op for op in module.walk() if isinstance(op, K.MmaOp)]
    assert mmas and all(x.type.dtype.name == dtype for op in mmas for x in op.operands[:2]), print_module(module)
    assert any(isinstance(op, K.LdmatrixOp) for op in module.walk()) == bool(later), print_module(module)


WGMMA_LATER = [
    "tile-chunk-reduce{bk=16}",
    "tile-chunk-reduce{bk=32}",
    "tile-chunk-reduce{bk=64}",
    "tile-chunk-reduce{bk=128}",  # 256-byte rows of 16-bit slabs: stored in blocks of 64 columns
]


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from((64, 128)),
    st.sampled_from((8, 16, 32)),
    st.sampled_from((32, 64, 128)),
    st.sampled_from(("bf16", "f16")),
    st.sampled_from(((False, False, False), (True, False, False), (False, True, False), (False, False, True))),
    st.sampled_from((64, 128)),
    st.sampled_from(WGMMA_LATER),
    st.sampled_from((1, 2, 3, 4)),
    st.sampled_from((0, 1)),
    st.sampled_from(("all", "none")),
    st.booleans(),
    st.sampled_from(("on", "off")),
)
@example(128, 64, 128, "bf16", (False, False, False), 64, "tile-chunk-reduce{bk=32}", 3, 1, "all", False, "off")
@example(128, 64, 256, "bf16", (False, False, False), 128, "tile-chunk-reduce{bk=16}", 2, 1, "all", True, "on")
@example(64, 32, 128, "f16", (True, False, False), 64, "tile-chunk-reduce{bk=32}", 3, 1, "all", False, "on")
@example(128, 8, 32, "bf16", (False, False, False), 128, "tile-chunk-reduce{bk=16}", 2, 0, "all", False, "on")
@example(128, 32, 256, "bf16", (False, False, False), 64, "tile-chunk-reduce{bk=128}", 2, 1, "all", False, "off")
@example(64, 16, 256, "f16", (False, False, False), 64, "tile-chunk-reduce{bk=128}", 3, 0, "all", False, "on")
def test_wgmma_contractions_match_the_loop_interpreter(
    m, n, k, dtype, variant, bm, chunk, stages, depth, tma, split, producer
):
    """nn.Linear's product laid out on wgmma (warpgroups of 64 rows), its K in chunks staged in rings of 1 to 4
    slots by the tensor memory accelerator (swizzled for the descriptors) or by the threads, prefetched as deep as
    the ring allows or one trip ahead, sometimes split over blocks, the copies sometimes given to a producer warp
    (`tile-warp-specialize`; a warpgroup handing its registers to the block's threads where they are whole
    warpgroups, sm_90a's setmaxnreg): the kernel simulator (reading the slabs through the descriptors' layout,
    catching a slot refilled while a wgmma reads it and an accumulator read before its wait, running the producer
    and the block's warps as they block on their mbarriers) gives the loop interpreter's answer. A trip leaves its wgmma
    group in flight exactly where the ring is two deeper than the prefetch (a producer's stages have none). Slabs
    the threads copy run on mma.sync from the same layout; products the descriptors cannot read (a prologue, x
    stored M-major) are declined."""
    from irforge.parser import parse_module

    bias, a_t, prologue = variant
    module = parse_module(_linear(m, n, k, dtype, bias=bias, a_t=a_t, prologue=prologue))
    expected = interpret(module, seed=5)
    bm = min(bm, m)  # a warpgroup per 64 rows
    passes = [f"tile-blockify{{bm={bm} bn={n} threads={2 * bm}}}", "tile-tensorize{atom=wgmma}", chunk]
    passes += ["tile-split-reduce{splits=2}"] if split else []
    passes += [
        "tile-stage-inputs",
        f"tile-multi-buffer{{stages={stages}}}",
        f"tile-tma{{stages={tma}}}",
        f"tile-pipeline{{depth={depth}}}",
        f"tile-warp-specialize{{producer={producer}}}",
    ]
    passes += ["tile-swizzle-smem"]
    assert schedule(module, passes) is None
    tensorized = [lp for lp in module.walk() if isinstance(lp, T.ForOp) and "atom" in lp.attributes]
    assert bool(tensorized) == (not a_t and not prologue), print_module(module)
    text = print_module(module)
    descriptors = [st for lp in tensorized for st in fragments.descriptor_stages(lp)]
    fed = bool(descriptors) and all(st.copy == "tma" for st in descriptors)
    stages_all = [op for op in module.walk() if isinstance(op, T.StageOp)]
    produced = [st for st in stages_all if st.producer]
    # rings (a K loop of several trips) and nothing else needing the block's barriers
    alone = fed and all(st.ring > 1 for st in descriptors) and set(stages_all) == set(descriptors)
    assert bool(produced) == (producer == "on" and alone), text
    blocks = {k.sym_name: k.attributes["block"][0] for k in module.walk() if isinstance(k, T.KernelOp)}
    run_pipeline(module, "tile-to-kernel")
    assert_close(expected, interpret(module, seed=5), module, f"kernel, {passes}:\n{text}")
    wgmma = [op for op in module.walk() if op.name == "kernel.wgmma"]
    event(f"on wgmma: {bool(wgmma)}")
    assert bool(wgmma) == fed, text
    event(f"producer warp: {bool(produced)}")
    for k in (op for op in module.walk() if op.name == "kernel.func" and op.attributes["sym_name"] in blocks):
        threads = blocks[k.attributes["sym_name"]]
        # a warpgroup that hands its registers to the block's threads where they are whole warpgroups, else a warp
        producer_threads = WG.WARPGROUP if threads % WG.WARPGROUP == 0 and WG.register_split(threads) else 32
        assert k.attributes["block"][0] == threads + producer_threads * bool(produced), text
    in_flight = fed and all(st.ring - st.prefetch >= 2 for st in descriptors)
    waits = sorted({op.attributes["pending"] for op in module.walk() if op.name == "kernel.wgmma_wait"})
    event(f"wgmma group left in flight: {in_flight}")
    assert waits == ([0, 1] if in_flight else [0] if fed else []), (waits, text)
    assert any(op.name == "kernel.mma" for op in module.walk()) == (bool(tensorized) and not fed), text


@pytest.mark.parametrize(
    "changed, staged, by_threads",
    [
        ({"tile-stage-inputs": "tile-stage-inputs{max-bytes=16384}"}, {"x", "g"}, set()),
        (
            {"tile-chunk-reduce": "tile-chunk-reduce{bk=128}", "tile-multi-buffer": "tile-multi-buffer{stages=5}"},
            {"x", "g", "u"},
            {"x"},
        ),
    ],
)
def test_a_gated_product_whose_factors_wgmma_cannot_all_read_matches_the_loop_interpreter(changed, staged, by_threads):
    """SiLU(x @ g) * (x @ u) laid out on wgmma where not every factor is a slab the tensor memory accelerator
    copies, so it runs on mma.sync atoms, as the loop interpreter computes it. A stage budget
    (`tile-stage-inputs{max-bytes=16384}`) that holds x's and g's slabs but not u's: the two carriers' factors reach
    the tile's columns through g's slab (the block's column offset in its box) and through u's own loads (the offset
    in their subscripts), still one contraction (before, lower-to-kernel found none). Rings of 5 for chunks of 128
    (`bk=128 stages=5`) that leave x single-buffered, copied by the threads: u's and g's slabs keep rows the
    mma.sync path reads (before, tile-swizzle-smem stored them in wgmma's blocks of 64 columns, which only
    descriptors read, and lower-to-kernel failed)."""
    from irforge import frontend
    from irforge.compiler import compile_program
    from irforge.registry import registry

    snippet = (
        "import torch.nn.functional as F; x = torch.randn(64, 256, dtype=torch.bfloat16); "
        "g = torch.randn(192, 256, dtype=torch.bfloat16); u = torch.randn(192, 256, dtype=torch.bfloat16); "
        "F.silu(F.linear(x, g)) * F.linear(x, u)"
    )
    lines = [ln.split("#")[0].strip() for ln in registry().pipelines()["loop-to-tile"].text.splitlines()]
    passes = [changed.get(p.strip(), p.strip()) for p in "".join(lines).split(",") if p.strip()]
    with use_target(Target(arch="sm_90a")):
        module = compile_program(frontend.from_snippet(snippet), "loop").module
        expected = interpret(module, seed=5)
        run_pipeline(module, ",".join(passes))
        text = print_module(module)
        stages = [op for op in module.walk() if isinstance(op, T.StageOp)]
        assert "atom wgmma" in text and {st.source.name_hint for st in stages} == staged, text
        assert {st.source.name_hint for st in stages if st.copy != "tma"} == by_threads, text
        run_pipeline(module, "tile-to-kernel")
    assert any(isinstance(op, K.MmaOp) for op in module.walk()), text
    assert_close(expected, interpret(module, seed=5), module, f"kernel:\n{text}")
