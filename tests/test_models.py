"""Whole models on the CPU: tiny HF Llama and Qwen2 configs (2 layers, hidden 64, random weights) captured whole,
split at their decoder layers and lowered to the loop level, against HF transformers itself: the prefill's logits,
the greedy tokens of a prefill and 8 decode steps, each step's logits; weights loaded back from safetensors and
GGUF files the tests write."""

from __future__ import annotations

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from irforge.models import compile_model  # noqa: E402
from irforge.models.generate import Interpreted, greedy, hf_greedy, hf_model, hf_step_logits  # noqa: E402
from irforge.models.weights import gguf_name, load_weights, random_weights, rotary_permute  # noqa: E402
from irforge.testing import compare  # noqa: E402

# Larger than HF's 0.02: with tiny random weights attention is near uniform and position-blind, and a wrong
# mask or rotary embedding would still give HF's tokens.
STD = 0.3


def tiny(kind: str):
    cls = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config}[kind]
    config = cls(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=172,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    config._attn_implementation = "sdpa"
    return config


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def tiny_model(request):
    config = tiny(request.param)
    model = compile_model(config, batch=2, prompt_len=5, max_len=16, level="loop", cache=False, parallel=False)
    params = load_weights(None, model.param_types, "f32", config)
    params.update(random_weights({k: t for k, t in model.param_types.items() if "rotary" not in k}, "f32", 1, std=STD))
    return config, model, params


def test_identical_layers_share_a_segment(tiny_model):
    _, model, _ = tiny_model
    for step in model.steps.values():
        layers = [i for i in step.instances if i.scope.startswith("model.layers.")]
        assert [i.scope for i in layers] == ["model.layers.0", "model.layers.1"]
        assert {i.segment for i in layers} == {"layer"}
        assert set(step.segments) == {"prologue", "layer", "epilogue"}
        # one parameter set per layer: the segment's relative names bound to each layer's own weights
        assert layers[1].symbols["self_attn.q_proj.weight"] == "model.layers.1.self_attn.q_proj.weight"
        assert layers[0].symbols["k_cache"] == "model.layers.0.k_cache"


def test_prefill_and_decode_match_hf(tiny_model):
    config, model, params = tiny_model
    prompt = np.random.default_rng(0).integers(0, config.vocab_size, (2, 5))
    lm = hf_model(config, params)
    ref = hf_greedy(lm, prompt, 9)
    runner = Interpreted(model, params)
    ours = greedy(runner, prompt, 9)
    assert (ours == ref).all(), f"irforge {ours.tolist()} vs HF {ref.tolist()}"
    want = hf_step_logits(lm, prompt, ref[:, :8])  # the prefill, then the 8 decode steps
    runner = Interpreted(model, params)
    got = [runner("prefill", prompt, np.arange(5))]
    got += [runner("decode", ref[:, t : t + 1], np.array([5 + t])) for t in range(8)]
    for t, (g, w) in enumerate(zip(got, want)):
        c = compare(g, w, model.steps["decode"].output_types[0].dtype)
        assert c.ok, f"step {t}: {c}"
    assert len(np.unique(ref)) > 3  # the weights make tokens depend on the prompt, not one repeated token


def test_safetensors_round_trip(tmp_path, tiny_model):
    from safetensors.torch import save_file

    config, model, params = tiny_model
    weights = {k: v for k, v in params.items() if "rotary" not in k}
    save_file({k: v.contiguous() for k, v in weights.items()}, str(tmp_path / "model.safetensors"))
    loaded = load_weights(str(tmp_path), model.param_types, "bf16", config)
    for k, v in weights.items():
        assert torch.equal(loaded[k], v.to(torch.bfloat16)), k


def test_gguf_round_trip(tmp_path, tiny_model):
    """A GGUF file as llama.cpp writes one (its tensor names, rotary rows permuted for Llama, some tensors
    quantized to Q8_0) loads back to the HF weights."""
    import gguf

    config, model, params = tiny_model
    weights = {k: v for k, v in params.items() if "rotary" not in k}
    path = str(tmp_path / "model.gguf")
    w = gguf.GGUFWriter(path, config.model_type)
    quantized = set()
    for k, v in weights.items():
        a = v.float().numpy()
        if config.model_type == "llama" and k.endswith(("q_proj.weight", "k_proj.weight")):
            heads = config.num_attention_heads if "q_proj" in k else config.num_key_value_heads
            a = rotary_permute(a, heads)
        if k.endswith("mlp.up_proj.weight"):  # 2-D, rows a multiple of Q8_0's block of 32
            w.add_tensor(
                gguf_name(k),
                gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q8_0),
                raw_dtype=gguf.GGMLQuantizationType.Q8_0,
            )
            quantized.add(k)
        else:
            w.add_tensor(gguf_name(k), a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    loaded = load_weights(path, model.param_types, "f32", config)
    for k, v in weights.items():
        if k in quantized:  # Q8_0: 8 bits per value and one scale per block of 32
            assert torch.allclose(loaded[k], v, atol=float(v.abs().max()) / 100), k
        else:
            assert torch.equal(loaded[k], v), k
    assert quantized


def test_linked_cuda_program(tiny_model):
    """Both steps of a tiny model lowered on to the cuda level (every kernel through NVRTC) and linked into one
    program per step: every instance's launches, each layer bound to its own params and cache."""
    from irforge.dialects.cuda import ops as C

    from irforge.models import dump_step, load_step, lower
    from irforge.models.gpu import link
    from irforge.parser import parse_module
    from irforge.printer import print_module
    from irforge.runtime.nvrtc import compile_cuda

    config, model, _ = tiny_model
    if config.model_type != "llama":
        pytest.skip("one model is enough")
    for loop_step in model.steps.values():
        step = load_step(dump_step(loop_step))  # a copy, lowered further
        lower(step, "cuda")
        for seg in step.segments.values():
            for k in (op for op in seg.module.body.ops if isinstance(op, C.CudaKernelOp)):
                assert compile_cuda(k.attributes["source"], k.attributes["sym_name"], arch="sm_90a").image
        module = parse_module(print_module(link(step)))  # verifies, and round-trips
        prog = next(op for op in module.body.ops if isinstance(op, C.ProgramOp))
        launches = [op for op in prog.body.ops if isinstance(op, C.LaunchOp)]
        per_segment = {n: sum(isinstance(op, C.LaunchOp) for op in s.module.walk()) for n, s in step.segments.items()}
        assert len(launches) == sum(per_segment[i.segment] for i in step.instances)
        state = {op.attributes["sym"].name for op in prog.body.ops if isinstance(op, C.StateOp)}
        assert state == {f"model.layers.{i}.{kv}" for i in range(2) for kv in ("k_cache", "v_cache")}
        params = [op.attributes["sym"].name for op in prog.body.ops if isinstance(op, C.ParamOp)]
        assert len(params) == len(set(params)) and set(params) <= set(model.param_types)
        assert "model.layers.1.self_attn.q_proj.weight" in params


@pytest.mark.slow
def test_tinyllama_compiles_to_cuda(tmp_path, monkeypatch):
    """The whole TinyLlama-1.1B config (22 layers, f32) to CUDA, every kernel through NVRTC: the 22 identical layers
    of each step are one segment, compiled once. (Its time is reported, not asserted: the compile-time goal is
    measured on a quiet machine, not in a shared test run.)"""
    import time

    monkeypatch.setenv("IRFORGE_CACHE_DIR", str(tmp_path))
    t = time.perf_counter()
    model = compile_model("tinyllama-1.1b", dtype="f32", prompt_len=32, max_len=64, level="cuda")
    print(f"TinyLlama-1.1B to CUDA in {time.perf_counter() - t:.1f} s: {model.summary()}")
    for step in model.steps.values():
        assert set(step.segments) == {"prologue", "layer", "epilogue"}
        assert [i.segment for i in step.instances].count("layer") == 22


def _write_config(directory, **fields):
    import json

    base = tiny("llama").to_dict()
    base.update(fields)
    (directory / "config.json").write_text(json.dumps(base))
    return str(directory)


def test_cli_compile_model_prints_each_segment_once(tmp_path, monkeypatch):
    """`irforge compile MODEL`: each step's segments printed once; a second compile reads the cache."""
    import io

    from irforge.tools.cli import main

    monkeypatch.setenv("IRFORGE_CACHE_DIR", str(tmp_path / "cache"))
    model = _write_config(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    args = [model, "--ir", "tensor", "--batch", "2", "--prompt-len", "4", "--max-len", "8"]
    assert main(["compile", *args], stdout=out, stderr=err) == 0
    again, err_again = io.StringIO(), io.StringIO()
    assert main(["compile", *args], stdout=again, stderr=err_again) == 0  # from the compile cache
    assert "(cached)" in err_again.getvalue() and again.getvalue() == out.getvalue()
    text = out.getvalue()
    assert text.count("// decode step, @layer: run 2 time(s), by model.layers.0, model.layers.1") == 1
    assert text.count("func.func @layer(") == 2  # once per step
    assert 'attributes {state = ["k_cache", "v_cache"]}' in text
    assert "prefill: @prologue x1, @layer x2, @epilogue x1" in err.getvalue()


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"model_type": "gpt2"}, "model type 'gpt2' is not supported: irforge compiles llama, qwen2 causal LMs"),
        ({"max_position_embeddings": 6}, "the cache length 8 exceeds the model's 6 positions"),
    ],
)
def test_cli_compile_model_refuses(tmp_path, fields, message):
    import io

    from irforge.tools.cli import main

    err = io.StringIO()
    model = _write_config(tmp_path, **fields)
    assert main(["compile", model, "--prompt-len", "4", "--max-len", "8"], stdout=io.StringIO(), stderr=err) == 1
    assert err.getvalue().strip() == f"error: {message}"


@pytest.mark.skipif(__import__("irforge.runtime", fromlist=["has_gpu"]).has_gpu(), reason="checks the no-GPU path")
def test_generate_without_a_gpu_says_so():
    import io

    from irforge.tools.cli import main

    err = io.StringIO()
    assert main(["generate", "tinyllama-1.1b", "--ids", "1,2,3", "-n", "4"], stdout=io.StringIO(), stderr=err) == 1
    assert err.getvalue() == "irforge generate: no CUDA GPU is visible here (irforge.runtime.has_gpu() is false)\n"


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_forward_without_cache_matches_hf(kind):
    """HF's plain forward (every position's logits, no cache): its mask comes from HF's packed-sequence detection,
    a cumsum and advanced indexing with several index tensors, all decomposed into the tensor level."""
    import irforge

    config = tiny(kind)
    lm = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        for p in lm.parameters():
            p.normal_(0, STD)

    class Forward(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = lm

        def forward(self, input_ids):
            return self.lm(input_ids=input_ids, use_cache=False).logits

    ids = torch.randint(0, config.vocab_size, (2, 7), generator=torch.Generator().manual_seed(0))
    prog = irforge.compile(Forward(), ids, ir="loop")
    ops = {op.name for op in irforge.compile(Forward(), ids, ir="torch").module.walk()}
    assert {"torch.aten.cumsum", "torch.aten.index.Tensor"} <= ops
    (c,) = prog.check()
    assert c.ok, c
