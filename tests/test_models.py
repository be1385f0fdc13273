"""Whole models on the CPU: tiny HF Llama and Qwen2 configs (3 layers, hidden 64, random weights) captured, split at
their decoder layers and lowered to the loop level, against HF transformers itself: the prefill's logits,
the greedy tokens of a prefill and 8 decode steps, each step's logits; weights loaded back from safetensors and
GGUF files the tests write."""

from __future__ import annotations

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from irforge.models import compile_model  # noqa: E402
from irforge.models.generate import Interpreted, greedy, hf_greedy, hf_model, hf_step_logits  # noqa: E402
from irforge.models.weights import gguf_name, load_weights, rotary_permute  # noqa: E402
from irforge.testing import compare  # noqa: E402

# Larger than HF's 0.02: with tiny random weights attention is near uniform and position-blind, and a wrong
# mask or rotary embedding would still give HF's tokens.
STD = 0.3


def tiny(kind: str, layers: int = 3):
    """Three layers: the third comes from the first two by induction (`program.repeat_layers`), so the checks
    against HF cover it."""
    cls = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config}[kind]
    config = cls(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=172,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        initializer_range=STD,
    )
    config._attn_implementation = "sdpa"
    return config


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def tiny_model(request):
    config = tiny(request.param)
    model = compile_model(config, batch=2, prompt_len=5, max_len=16, level="loop", cache=False, parallel=False)
    return config, model, load_weights(None, model.param_types, "f32", config, seed=1)


def test_identical_layers_share_a_segment(tiny_model):
    _, model, _ = tiny_model
    for step in model.steps.values():
        layers = [i for i in step.instances if i.scope.startswith("model.layers.")]
        assert [i.scope for i in layers] == ["model.layers.0", "model.layers.1", "model.layers.2"]
        assert {i.segment for i in layers} == {"layer"}
        assert set(step.segments) == {"prologue", "layer", "epilogue"}
        # one parameter set per layer: the segment's relative names bound to each layer's own weights
        assert layers[1].symbols["self_attn.q_proj.weight"] == "model.layers.1.self_attn.q_proj.weight"
        assert layers[2].symbols["self_attn.q_proj.weight"] == "model.layers.2.self_attn.q_proj.weight"
        assert layers[0].symbols["k_cache"] == "model.layers.0.k_cache"
        assert list(step.state) == [f"model.layers.{i}.{kv}" for i in range(3) for kv in ("k_cache", "v_cache")]
        # each layer reads the one before it; the epilogue reads the last
        assert set(layers[1].outputs) & set(layers[2].inputs)
        assert set(layers[2].outputs) & set(step.instances[-1].inputs)


def test_layers_by_induction_equal_the_whole_capture():
    """Four layers captured as two and extended by induction give the step the whole capture gives: the same
    segments, the same instances (reading and writing the same values, under other names), state and params."""
    from irforge.hashing import structural_hash
    from irforge.models import capture_step

    config = tiny("llama", layers=4)
    small, small_params = capture_step(config, "decode", "f32", 2, 1, 16)
    whole, whole_params = capture_step(config, "decode", "f32", 2, 1, 16, whole=True)
    assert small_params == whole_params and small.state == whole.state
    assert list(small.state) == list(whole.state)
    assert {n: structural_hash(s.func) for n, s in small.segments.items()} == {
        n: structural_hash(s.func) for n, s in whole.segments.items()
    }
    names: dict[str, str] = {}  # small's value keys -> whole's, a bijection
    for name, _ in small.inputs:
        names[name] = name
    assert len(small.instances) == len(whole.instances) == 6
    for a, b in zip(small.instances, whole.instances):
        assert (a.segment, a.scope, a.symbols) == (b.segment, b.scope, b.symbols)
        assert [names[k] for k in a.inputs] == b.inputs
        names.update(zip(a.outputs, b.outputs))
    assert [names[k] for k in small.outputs] == whole.outputs
    assert len(set(names.values())) == len(names)


def test_layers_configured_differently_are_captured_whole():
    from irforge.models import _layers_alike, _with_layers

    config = tiny("qwen2", layers=4)
    assert _layers_alike(config)
    config.layer_types = ["full_attention"] * 3 + ["sliding_attention"]
    assert not _layers_alike(config)
    small = _with_layers(config, 2)
    assert (small.num_hidden_layers, small.layer_types) == (2, ["full_attention"] * 2)
    assert config.num_hidden_layers == 4 and len(config.layer_types) == 4


def test_the_cache_comes_in_whole_chunks_of_keys(tiny_model):
    """A cache of 16 tokens has 64 slots (`hf.cache_capacity`: attention's keys in whole chunks of tensor-core
    atoms); the other tests check that the slots past 16 change no logit."""
    from irforge.models.hf import CACHE_ALIGN

    _, model, _ = tiny_model
    for step in model.steps.values():
        assert {t.shape[2] for t in step.state.values()} == {CACHE_ALIGN}


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


def test_hf_static_steps_compiled_give_hf_logits():
    """The torch.compile system that `irforge generate` times (`HFStatic`: HF's static cache stepped by hand, the
    decode step compiled whole; CUDA graphs aside, which need a GPU) gives HF's own logits at every step, after a
    second prefill too (the cache reset), and returns copies that later steps leave alone."""
    from irforge.models.generate import HFStatic
    from irforge.models.hf import build_lm

    config = tiny("llama")
    torch.manual_seed(0)
    lm = build_lm(config, "f32", "cpu")
    prompt = np.random.default_rng(0).integers(0, config.vocab_size, (2, 5))
    ref = hf_greedy(lm, prompt, 4)
    want = hf_step_logits(lm, prompt, ref[:, :3])
    torch._dynamo.reset()
    steps = HFStatic(lm, 2, 16, compile=lambda f: torch.compile(f, backend="eager", fullgraph=True))
    for _ in range(2):
        got = [steps.prefill(prompt)] + [steps.decode(ref[:, t : t + 1]) for t in range(3)]
        for t, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-5, err_msg=f"step {t}")
    assert len({g.data_ptr() for g in got}) == len(got)
    torch._dynamo.reset()


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
    gguf = pytest.importorskip("gguf")  # the `models` extra's, as transformers is

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
        assert state == {f"model.layers.{i}.{kv}" for i in range(3) for kv in ("k_cache", "v_cache")}
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
    assert text.count("// decode step, @layer: run 3 time(s), by model.layers.0 .. model.layers.2") == 1
    assert text.count("func.func @layer(") == 2  # once per step
    assert 'attributes {state = ["k_cache", "v_cache"]}' in text
    assert "prefill: @prologue x1, @layer x3, @epilogue x1" in err.getvalue()


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
    assert err.getvalue() == (
        "irforge generate: no CUDA GPU is visible here (irforge.runtime.has_gpu() is false); --interpret runs on the "
        "CPU\n"
    )


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


def _write_tokenizer(directory, vocab: int) -> None:
    """A word-level tokenizer.json over the words w0 .. w{vocab-1}, split at spaces."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(vocab)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    tok.save(str(directory / "tokenizer.json"))


def test_cli_generate_interpreted_matches_hf(tmp_path, monkeypatch):
    """`irforge generate DIR --prompt ... --interpret`: the directory's tokenizer encodes the prompt and decodes the
    tokens; the tokens are HF's greedy tokens with the same weights (the JSON holds both)."""
    import io
    import json

    from irforge.tools.cli import main

    monkeypatch.setenv("IRFORGE_CACHE_DIR", str(tmp_path / "cache"))
    model = _write_config(tmp_path)
    _write_tokenizer(tmp_path, 128)
    out, err = io.StringIO(), io.StringIO()
    args = ["generate", model, "--prompt", "w5 w17 w99 w3", "-n", "6", "--batch", "2", "--interpret", "--seed", "3"]
    assert main([*args, "--json", str(tmp_path / "g.json")], stdout=out, stderr=err) == 0, err.getvalue()
    report = json.loads((tmp_path / "g.json").read_text())
    assert report["prompt"] == [[5, 17, 99, 3]] * 2
    assert report["match"] and report["tokens"] == report["hf_tokens"]
    assert len({t for row in report["tokens"] for t in row}) > 2  # weights of std 0.3: tokens that depend on the prompt
    lines = out.getvalue().splitlines()
    row = report["tokens"][0]
    assert lines[0] == ",".join(map(str, row)) + "\t" + repr(" ".join(f"w{t}" for t in row))
    assert lines[2] == "HF eager's greedy tokens: identical (2 x 6 tokens)"
    # independently: HF's generate on the weights the command loads
    from irforge.models.configs import load_config

    config = load_config(model)
    compiled = compile_model(config, batch=2, prompt_len=4, max_len=10, level="loop", parallel=False)
    params = load_weights(None, compiled.param_types, "f32", config, seed=3)
    assert hf_greedy(hf_model(config, params), np.array(report["prompt"]), 6).tolist() == report["tokens"]


def test_cli_generate_compiled_elsewhere(tmp_path, monkeypatch):
    """`irforge compile MODEL --save FILE` then `irforge generate MODEL --compiled FILE`; a saved model that does
    not fit the prompt, the flags or the model is refused."""
    import io

    from irforge.tools.cli import main

    from irforge.models.cli import agreement

    monkeypatch.setenv("IRFORGE_CACHE_DIR", str(tmp_path / "cache"))
    model = _write_config(tmp_path)
    saved = str(tmp_path / "m.json")
    compile_args = [model, "--ir", "loop", "--prompt-len", "3", "--max-len", "6", "--save", saved, "-o", "/dev/null"]
    assert main(["compile", *compile_args], stdout=io.StringIO(), stderr=io.StringIO()) == 0
    base = ["generate", model, "--compiled", saved, "--interpret", "--no-compare"]

    def gen(*extra):
        out, err = io.StringIO(), io.StringIO()
        code = main([*base, *extra], stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue().strip()

    code, out, _ = gen("--ids", "1,2,3", "-n", "4")
    assert code == 0 and len(out.split(",")) == 4
    assert (
        gen("--ids", "1,2", "-n", "4")[2]
        == f"error: '{saved}' was compiled for a prompt of 3 token(s); this prompt has 2"
    )
    assert gen("--ids", "1,2,3", "-n", "5")[2] == (
        f"error: '{saved}' was compiled with a cache of 6 tokens: too short for 5 new tokens"
    )
    assert gen("--ids", "1,2,3", "--dtype", "bf16")[2] == f"error: '{saved}' was compiled for --dtype f32, not bf16"
    base[3] = str(tmp_path / "missing.json")
    assert gen("--ids", "1,2,3")[2] == f"error: cannot read the compiled model '{base[3]}': No such file or directory"
    base[3] = model + "/config.json"
    assert gen("--ids", "1,2,3")[2] == (
        f"error: '{base[3]}' is not a compiled model (irforge compile MODEL --save FILE writes one)"
    )
    base[3] = saved
    (tmp_path / "other").mkdir()
    other = _write_config(tmp_path / "other", hidden_size=32)
    base[1] = other
    assert gen("--ids", "1,2,3")[2] == (
        f"error: '{saved}' was compiled for another model: its hidden_size is 64, {other}'s is 32"
    )
    assert agreement(np.array([[1, 2, 3], [4, 5, 6]]), np.array([[1, 2, 3], [4, 7, 6]])) == (
        "DIFFERENT: sequence 1 from token 1 (irforge 5, HF 7)"
    )
