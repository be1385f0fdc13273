"""Model architectures: built-in configs (no download) or an HF `config.json` / model directory.

    config = load_config("tinyllama-1.1b")          # a built-in: the HF config of TinyLlama-1.1B
    config = load_config("path/to/model")           # a directory holding config.json (and maybe weights)
    config = load_config("path/to/config.json")

The built-ins are the published HF configs of the models, written out here so that nothing is downloaded.
"""

from __future__ import annotations

import json
import os

from irforge.diagnostics import error

SUPPORTED = ("llama", "qwen2")  # HF model types whose *ForCausalLM irforge captures and compiles

BUILTIN: dict[str, dict] = {
    "tinyllama-1.1b": {  # TinyLlama/TinyLlama-1.1B-Chat-v1.0
        "model_type": "llama",
        "vocab_size": 32000,
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 22,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-05,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
    },
    "qwen2.5-7b": {  # Qwen/Qwen2.5-7B
        "model_type": "qwen2",
        "vocab_size": 152064,
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": False,
        "use_sliding_window": False,
        "bos_token_id": 151643,
        "eos_token_id": 151643,
    },
    "smollm2-135m": {  # HuggingFaceTB/SmolLM2-135M
        "model_type": "llama",
        "vocab_size": 49152,
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-05,
        "rope_theta": 100000.0,
        "tie_word_embeddings": True,
        "bos_token_id": 0,
        "eos_token_id": 0,
    },
}


def model_dir(spec: str) -> str | None:
    """The directory a model spec names (where weights and a tokenizer may be), or None for a built-in."""
    if spec in BUILTIN:
        return None
    return spec if os.path.isdir(spec) else os.path.dirname(os.path.abspath(spec))


def load_config(spec: str):
    """The HF config (`transformers.PretrainedConfig`) of a built-in name, a model directory or a config.json."""
    try:
        from transformers import AutoConfig
    except ImportError:
        raise error("whole models need transformers: pip install -e '.[models]'") from None
    if spec in BUILTIN:
        fields = dict(BUILTIN[spec])
    else:
        path = os.path.join(spec, "config.json") if os.path.isdir(spec) else spec
        try:
            with open(path, encoding="utf-8") as f:
                fields = json.load(f)
        except OSError as e:
            names = ", ".join(BUILTIN)
            raise error(f"'{spec}' is neither a built-in model ({names}) nor a readable config: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise error(f"'{path}' is not valid JSON: {e.msg} (line {e.lineno})") from None
    kind = fields.get("model_type")
    if kind not in SUPPORTED:
        raise error(f"model type {kind!r} is not supported: irforge compiles {', '.join(SUPPORTED)} causal LMs")
    fields.pop("model_type")
    config = AutoConfig.for_model(kind, **fields)
    config._attn_implementation = "sdpa"
    return config
