"""The suites as data: the ids and shapes of the benchmark notes, bytes and FLOPs against hand computations and
torch's FLOP counter, seeded inputs, the decoder-layer rows; the llm suite's fp16 linears compile with NVRTC."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from irforge.bench import models, ops
from irforge.bench.case import select, suite
from irforge.diagnostics import IRForgeError

LLM_IDS = (
    [f"R{i}" for i in (1, 2, 3, 4, 6, 7, 8)]
    + ["P1", "P2", "P3", "S1", "S2", "S4", "G1", "G2", "G3", "G4", "A1"]
    + [f"L{i}" for i in range(1, 15)]
    + [f"L{i}.f16" for i in range(1, 15)]
    + [f"F{i}" for i in range(1, 7)]
    + [f"D{i}" for i in range(1, 5)]
)


@pytest.fixture(scope="module")
def seed84():
    return {c.id: c for c in suite("seed84")}


@pytest.fixture(scope="module")
def llm():
    return {c.id: c for c in suite("llm")}


def shapes(case):
    return [i.shape for i in case.inputs]


def test_seed84_has_the_84_cases_by_family(seed84):
    assert len(seed84) == 84
    fams = Counter(c.family for c in seed84.values())
    assert fams == {
        "matmul": 36,
        "rmsnorm": 6,
        "softmax": 6,
        "silu_mul": 6,
        "sdpa": 6,
        "naive_attn": 6,
        "matmul_add": 12,
        "silu_mul_matmul": 6,
    }
    assert all(c.dtype == torch.float32 and c.tol == 1e-4 for c in seed84.values())
    assert shapes(seed84["matmul.TL.q.s128"]) == [(1, 128, 2048), (2048, 2048)]
    assert shapes(seed84["matmul.TL.kv.s32"]) == [(1, 32, 2048), (2048, 256)]
    assert shapes(seed84["matmul.QW.down.s512"]) == [(1, 512, 18944), (18944, 3584)]
    assert shapes(seed84["matmul_add.QW.down.s512"]) == [(1, 512, 18944), (18944, 3584), (1, 512, 3584)]
    assert shapes(seed84["naive_attn.TL.s32"]) == [(1, 32, 32, 64)] * 3
    assert shapes(seed84["sdpa.QW.s128"]) == [(1, 28, 128, 128), (1, 4, 128, 128), (1, 4, 128, 128)]
    assert shapes(seed84["softmax.QW.s512"]) == [(1, 28, 512, 512)]
    assert shapes(seed84["silu_mul_matmul.TL.s512"]) == [(1, 512, 5632), (1, 512, 5632), (5632, 2048)]


def test_llm_ids_and_shapes_follow_the_notes(llm):
    assert list(llm) == LLM_IDS
    f16 = {cid for cid in llm if cid.endswith(".f16")}
    assert all(c.dtype == torch.bfloat16 and c.tol == 2e-2 for cid, c in llm.items() if cid not in f16)
    assert all(c.dtype == torch.float16 and c.tol == 2e-2 for cid, c in llm.items() if cid in f16)
    assert shapes(llm["R7"]) == [(4096, 4096), (4096,)]
    assert shapes(llm["R8"]) == [(512, 3584), (512, 3584), (3584,)]
    assert shapes(llm["P2"])[:2] == [(2048, 28, 128), (2048, 4, 128)]
    assert shapes(llm["S4"]) == [(32, 152064)]
    assert shapes(llm["G3"]) == [(2048, 18944)] * 2
    # linear [M,K] x [K,N] as the notes write it; the weight is kept [N,K] as nn.Linear keeps it
    mkn = {
        "L1": (512, 2048, 2560), "L2": (2048, 2048, 11264), "L3": (2048, 5632, 2048), "L4": (128, 2048, 2048),
        "L5": (1, 2048, 2560), "L6": (1, 2048, 32000), "L7": (2048, 3584, 4608), "L8": (512, 3584, 3584),
        "L9": (2048, 3584, 37888), "L10": (2048, 18944, 3584), "L11": (1, 3584, 37888), "L12": (32, 18944, 3584),
        "L13": (1, 3584, 152064), "L14": (32, 3584, 152064),
    }  # fmt: skip
    for cid, (m, k, n) in mkn.items():
        assert shapes(llm[cid]) == shapes(llm[f"{cid}.f16"]) == [(m, k), (n, k)], cid
        assert llm[cid].flops == llm[f"{cid}.f16"].flops and llm[cid].bytes == llm[f"{cid}.f16"].bytes, cid
    assert shapes(llm["F3"]) == [(1, 28, 2048, 128), (1, 4, 2048, 128), (1, 4, 2048, 128)]
    assert shapes(llm["F4"]) == [(32, 32, 1, 64), (32, 4, 2048, 64), (32, 4, 2048, 64)]
    assert shapes(llm["F5"]) == [(1, 28, 1, 128), (1, 4, 2048, 128), (1, 4, 2048, 128)]
    # decode layers read a cache of 512; prefill layers have none
    assert shapes(llm["D1"]) == [(1, 1, 2048), (1, 1, 64), (1, 1, 64), (1, 4, 512, 64), (1, 4, 512, 64)]
    assert shapes(llm["D4"]) == [(1, 2048, 3584), (1, 2048, 128), (1, 2048, 128)]


def test_bytes_by_hand(seed84, llm):
    # x, w read, the [1,128,2048] product written, f32
    assert seed84["matmul.TL.q.s128"].bytes == (128 * 2048 + 2048 * 2048 + 128 * 2048) * 4
    # softmax reads and writes (1,28,512,512)
    assert seed84["softmax.QW.s512"].bytes == 2 * 28 * 512 * 512 * 4
    # x and r read, weight read, the sum and the norm written, bf16
    assert llm["R8"].bytes == (4 * 512 * 3584 + 3584) * 2
    # rope: q and k read and written, the cos and sin tables read
    assert llm["P1"].bytes == (2 * (512 * 32 * 64 + 512 * 4 * 64) + 2 * 512 * 64) * 2


def test_flops_by_hand(seed84, llm):
    assert seed84["matmul.TL.gate.s512"].flops == 2 * 512 * 2048 * 5632
    assert seed84["silu_mul_matmul.QW.s32"].flops == 2 * 32 * 18944 * 3584
    # causal: 128·129/2 query-key pairs per head, 4·d FLOPs each, 32 heads
    assert seed84["sdpa.TL.s128"].flops == 4 * 32 * 64 * (128 * 129 // 2)
    assert seed84["naive_attn.TL.s128"].flops == seed84["sdpa.TL.s128"].flops
    assert llm["L9"].flops == 2 * 2048 * 3584 * 37888
    assert llm["F4"].flops == 4 * 32 * 32 * 64 * 2048  # decode: every cached key
    assert seed84["rmsnorm.TL.s32"].flops == 0 and llm["S2"].flops == 0
    assert ops.attention_pairs(2, 5, causal=True) == 4 + 5


def _counted(case) -> dict[str, int]:
    """torch's FLOP counter on the case's program, run on meta tensors."""
    with FlopCounterMode(display=False) as fc:
        case.program("meta")(*case.empty_inputs("meta"))
    return {str(k).removeprefix("aten."): v for k, v in fc.get_flop_counts().get("Global", {}).items()}


def test_flops_agree_with_torch_flop_counter(seed84, llm):
    """Contractions count what torch counts; causal attention counts the pairs under the mask, torch all of them."""
    for case in [*seed84.values(), *[c for c in llm.values() if c.module is None]]:
        counted = sum(_counted(case).values())
        if case.family in ("sdpa", "naive_attn") and case.note != "decode":
            s = case.inputs[0].shape[-2]
            counted = counted * (s + 1) // (2 * s)
        assert case.flops == counted, case.id


def test_decoder_layer_flops_agree_with_torch_flop_counter(llm):
    pytest.importorskip("transformers")
    d3 = _counted(llm["D3"])
    m = models.TINYLLAMA
    assert d3["mm"] == 2 * 512 * (2048 * 2560 + 2048 * 2048 + 2048 * 11264 + 5632 * 2048)
    assert llm["D3"].flops == d3["mm"] + d3["bmm"] * 513 // 1024
    assert llm["D1"].flops == sum(_counted(llm["D1"]).values())  # decode: every key (512 cached + 1)
    assert llm["D1"].flops == 2 * 44_040_192 + 4 * m.heads * m.head_dim * 513


def test_decoder_layer_bytes_by_hand(llm):
    pytest.importorskip("transformers")
    weights = 2048 * 2560 + 2048 * 2048 + 2048 * 11264 + 5632 * 2048 + 2 * 2048  # qkv, o, gate_up, down, 2 norms
    assert llm["D3"].bytes == (weights + 512 * 2048 + 2 * 512 * 64 + 512 * 2048) * 2


def test_rope_tables_match_hf():
    pytest.importorskip("transformers")
    from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding

    m = models.QWEN
    pos = torch.arange(7, 300, 37)[None]
    cos, sin = Qwen2RotaryEmbedding(models.hf_config(m))(torch.empty(0, dtype=torch.bfloat16), pos)
    mine = models.rope_tables(m, pos, torch.bfloat16)
    assert torch.equal(mine[0], cos) and torch.equal(mine[1], sin)


def test_decoder_layer_runs_and_reads_its_cache(llm):
    """A tiny config of the same wrapper: the decode step's output depends on the cache it is given."""
    pytest.importorskip("transformers")
    from dataclasses import replace

    tiny = replace(models.TINYLLAMA, hidden=64, intermediate=128, heads=4, kv_heads=2, head_dim=16)
    torch.manual_seed(0)
    layer = models.decoder_layer(tiny).eval()
    h = torch.randn(1, 1, 64)
    cos, sin = models.rope_tables(tiny, torch.tensor([[5]]), torch.float32)
    k, v = torch.randn(1, 2, 5, 16), torch.randn(1, 2, 5, 16)
    with torch.no_grad():
        a, b = layer(h, cos, sin, k, v), layer(h, cos, sin, k, v * 2)
    assert a.shape == (1, 1, 64) and not torch.allclose(a, b)


def test_inputs_come_from_the_case_seed(seed84):
    case = seed84["rmsnorm.TL.s32"]
    a, b = case.make_inputs("cpu"), case.make_inputs("cpu")
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    other = seed84["rmsnorm.QW.s32"].make_inputs("cpu")
    assert not torch.equal(a[0][..., :16], other[0][..., :16])


def test_cases_missing_a_package_say_so(llm, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "transformers" else real(name, *a)
    )
    case = suite("llm")[-1]
    assert case.id == "D4" and case.missing() == "skipped: needs transformers" and case.bytes is None


def test_select_by_globs(seed84):
    cases = list(seed84.values())
    assert [c.id for c in select(cases, "naive_attn.TL.*,matmul.QW.kv.s32")] == [
        "naive_attn.TL.s32",
        "naive_attn.TL.s128",
        "naive_attn.TL.s512",
        "matmul.QW.kv.s32",
    ]
    assert [c.id for c in select(cases, "naive_attn.*,!*.QW.*,!*s128")] == ["naive_attn.TL.s32", "naive_attn.TL.s512"]
    assert len(select(cases, "!matmul*")) == 84 - 36 - 12
    with pytest.raises(IRForgeError, match="no case matches 'nope'"):
        select(cases, "matmul.*,nope")
    assert len(select(cases, None)) == 84


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_every_f16_linear_compiles_with_nvrtc_without_spills(llm, arch, tmp_path, monkeypatch):
    """L1.f16-L14.f16 through the default pipeline for `arch`: every kernel compiles with NVRTC with no stack frame
    and no spills; products of 16 rows or more run on f16 tensor-core atoms (wgmma or mma.sync on sm_90a, mma.sync
    on sm_80) and the decode rows' GEMVs on none; nothing is left in bf16."""
    from irforge.dialects.cuda import ops as C
    from irforge.dialects.torch.capture import capture

    from irforge.pass_manager import run_pipeline
    from irforge.runtime.nvrtc import resource_usage
    from irforge.target import Target, use_target

    monkeypatch.setenv("IRFORGE_CACHE_DIR", str(tmp_path))
    # wgmma's instruction is inline, naming its operand types; mma.sync's is the prelude's overload for __half
    wgmma, mma = r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f32\.f16\.f16", r"irf_mma_m16n8k16\("
    for cid in [c for c in llm if c.endswith(".f16")]:
        case = llm[cid]
        with use_target(Target(arch=arch)):
            captured = capture(case.program("cpu", init=False), case.empty_inputs("cpu"), ["x", "w"])
            run_pipeline(captured.module, "torch-to-cuda")
        kernels = [op for op in captured.module.body.ops if isinstance(op, C.CudaKernelOp)]
        source = "\n".join(k.attributes["source"] for k in kernels)
        assert "__half" in source and "bfloat16" not in source, cid
        on_wgmma, on_mma = bool(re.search(wgmma, source)), bool(re.search(mma, source))
        assert (on_wgmma or on_mma) == (case.inputs[0].shape[0] >= 16) and not (on_wgmma and arch == "sm_80"), cid
        for k in kernels:
            for name, use in resource_usage(k.attributes["source"], k.attributes["sym_name"], arch=arch).items():
                assert use.stack_frame == 0, (cid, name, use)
