"""The Llama decoder layer of llama_decoder.py in bfloat16 (weights and activations)."""

import os
import runpy

import torch

_f32 = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "llama_decoder.py"))
model = _f32["model"].to(torch.bfloat16)
example_inputs = tuple(x.to(torch.bfloat16) for x in _f32["example_inputs"])
