"""A model's weights, by the HF names its params carry (`model.layers.0.self_attn.q_proj.weight`):

- random (seeded): every tensor from its own generator (the seed and the name), HF's init (normal with the
  config's `initializer_range` as std, 0.02 for the built-ins; norm weights around 1), made on the device it is
  asked for, so a 7B model never passes through host memory;
- a safetensors directory (`*.safetensors`, HF's layout);
- a GGUF file (llama.cpp's layout and names), dequantized by the `gguf` package, q and k projections of Llama
  models un-permuted back to HF's rotary layout (llama.cpp permutes them when it converts).

Every source gives torch tensors in the compute dtype; a tied `lm_head.weight` comes from the embedding.
"""

from __future__ import annotations

import glob
import os
import re
import zlib

import numpy as np
import torch

from irforge.diagnostics import error

from .hf import DTYPES


def random_weights(types: dict, dtype: str, seed: int = 0, device="cpu", std: float = 0.02) -> dict[str, torch.Tensor]:
    """HF's initialization, reproducibly: tensor `name` from a generator seeded with (seed, crc32(name))."""
    out = {}
    for name, t in sorted(types.items()):
        g = torch.Generator(device=device).manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
        x = torch.randn(t.shape, generator=g, device=device, dtype=torch.float32) * std
        if name.endswith("norm.weight"):
            x += 1.0
        out[name] = x.to(DTYPES[dtype])
    return out


def safetensors_weights(directory: str, types: dict, dtype: str) -> dict[str, torch.Tensor]:
    """The params from the `*.safetensors` files of an HF model directory."""
    from safetensors import safe_open

    files = sorted(glob.glob(os.path.join(directory, "*.safetensors")))
    if not files:
        raise error(f"no *.safetensors file in '{directory}'")
    found = {}
    for f in files:
        with safe_open(f, framework="pt") as st:
            for k in st.keys():
                if k in types:
                    found[k] = st.get_tensor(k)
    return _complete(found, types, dtype, directory)


# llama.cpp's tensor names (gguf-py's TENSOR_NAMES for LLAMA and QWEN2) and HF's
_GGUF_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "blk.{i}.attn_norm.weight": "model.layers.{i}.input_layernorm.weight",
    "blk.{i}.ffn_norm.weight": "model.layers.{i}.post_attention_layernorm.weight",
    "blk.{i}.attn_q.weight": "model.layers.{i}.self_attn.q_proj.weight",
    "blk.{i}.attn_k.weight": "model.layers.{i}.self_attn.k_proj.weight",
    "blk.{i}.attn_v.weight": "model.layers.{i}.self_attn.v_proj.weight",
    "blk.{i}.attn_output.weight": "model.layers.{i}.self_attn.o_proj.weight",
    "blk.{i}.attn_q.bias": "model.layers.{i}.self_attn.q_proj.bias",
    "blk.{i}.attn_k.bias": "model.layers.{i}.self_attn.k_proj.bias",
    "blk.{i}.attn_v.bias": "model.layers.{i}.self_attn.v_proj.bias",
    "blk.{i}.ffn_gate.weight": "model.layers.{i}.mlp.gate_proj.weight",
    "blk.{i}.ffn_up.weight": "model.layers.{i}.mlp.up_proj.weight",
    "blk.{i}.ffn_down.weight": "model.layers.{i}.mlp.down_proj.weight",
}


def gguf_name(hf: str) -> str | None:
    """llama.cpp's name for an HF param name (None when GGUF has no such tensor)."""
    for g, h in _GGUF_NAMES.items():
        m = re.fullmatch(re.escape(h).replace(r"\{i\}", r"(\d+)"), hf)
        if m:
            return g.replace("{i}", m.group(1)) if m.groups() else g
    return None


def rotary_permute(w: np.ndarray, heads: int, inverse: bool = False) -> np.ndarray:
    """llama.cpp's reordering of a Llama q or k projection's rows (per head: the two rotary halves interleaved);
    `inverse` undoes it."""
    rows = w.shape[0]
    split = (heads, 2, rows // heads // 2) if not inverse else (heads, rows // heads // 2, 2)
    return w.reshape(*split, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_weights(path: str, types: dict, dtype: str, config) -> dict[str, torch.Tensor]:
    """The params from a GGUF file, dequantized to float and converted to the compute dtype."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    try:
        reader = GGUFReader(path)
    except (OSError, ValueError) as e:
        raise error(f"cannot read GGUF file '{path}': {e}") from None
    tensors = {t.name: t for t in reader.tensors}
    found = {}
    for name in types:
        g = gguf_name(name)
        t = tensors.get(g) if g else None
        if t is None:
            continue
        w = dequantize(t.data, t.tensor_type).reshape([int(n) for n in reversed(t.shape)])
        if config.model_type == "llama" and g.endswith(("attn_q.weight", "attn_k.weight")):
            heads = config.num_attention_heads if "attn_q" in g else config.num_key_value_heads
            w = rotary_permute(w, heads, inverse=True)
        found[name] = torch.from_numpy(np.array(w, dtype=np.float32))
    return _complete(found, types, dtype, path)


def _complete(found: dict, types: dict, dtype: str, where: str) -> dict[str, torch.Tensor]:
    """Every param, checked against its type, in the compute dtype (a tied lm_head from the embedding)."""
    if "lm_head.weight" in types and "lm_head.weight" not in found and "model.embed_tokens.weight" in found:
        found["lm_head.weight"] = found["model.embed_tokens.weight"]
    missing = sorted(set(types) - set(found))
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise error(f"'{where}' has no weight for {', '.join(missing[:3])}{more}")
    out = {}
    for name, t in types.items():
        w = found[name]
        if tuple(w.shape) != t.shape:
            raise error(f"'{where}': {name} has shape {list(w.shape)}, the model takes {list(t.shape)}")
        out[name] = w.to(DTYPES[dtype])
    return out


def load_weights(source: str | None, types: dict, dtype: str, config, seed: int = 0, device="cpu"):
    """The values of the params `types` names: weights from `source` (None for random, a directory of
    safetensors, or a .gguf file), and the buffers HF computes from the config (`hf.computed_buffers`)."""
    from .hf import computed_buffers

    buffers = {k: v for k, v in computed_buffers(config).items() if k in types}
    weights = {k: t for k, t in types.items() if k not in buffers}
    if source is None:
        out = random_weights(weights, dtype, seed, device, std=config.initializer_range)
    elif source.endswith(".gguf"):
        out = gguf_weights(source, weights, dtype, config)
    elif os.path.isdir(source):
        out = safetensors_weights(source, weights, dtype)
    else:
        raise error(f"weights '{source}': expected a directory of *.safetensors files or a .gguf file")
    for k, b in buffers.items():  # in the type the program reads them in (HF keeps inv_freq in f32)
        out[k] = b.to(device=device, dtype=DTYPES[types[k].dtype.name])
    return out
