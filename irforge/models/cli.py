"""`irforge generate MODEL`: greedy decoding on the GPU with a compiled model (the CLI's GPU side)."""

from __future__ import annotations

import os
import time

import numpy as np

from irforge.diagnostics import error


def prompt_ids(args, directory: str | None) -> tuple[list[int], object]:
    """The prompt's token ids, and the tokenizer when the model directory has one (for printing the output)."""
    tokenizer = None
    path = os.path.join(directory, "tokenizer.json") if directory else None
    if path and os.path.exists(path):
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(path)
    if args.ids is not None:
        try:
            ids = [int(x) for x in args.ids.split(",") if x.strip()]
        except ValueError:
            raise error(f"--ids takes comma-separated token ids, got '{args.ids}'") from None
    elif tokenizer is None:
        raise error(f"--prompt needs a tokenizer: '{args.model}' has no tokenizer.json; give token ids with --ids")
    else:
        ids = tokenizer.encode(args.prompt).ids
    if not ids:
        raise error("the prompt has no tokens")
    return ids, tokenizer


def generate(args, out, err) -> int:
    import torch

    from . import compile_model
    from .configs import load_config, model_dir
    from .generate import greedy, hf_model
    from .gpu import OnGPU
    from .speed import copy_bandwidth, decode_bytes, hf_speed, irforge_speed
    from .weights import load_weights

    config = load_config(args.model)
    directory = model_dir(args.model)
    ids, tokenizer = prompt_ids(args, directory)
    if args.tokens < 1:
        raise error(f"-n must be at least 1, got {args.tokens}")
    prompt = np.array([ids] * args.batch, dtype=np.int64)
    t = time.perf_counter()
    model = compile_model(
        config, dtype=args.dtype, batch=args.batch, prompt_len=len(ids), max_len=len(ids) + args.tokens
    )
    err.write(f"compiled in {time.perf_counter() - t:.1f} s: {model.summary()}\n")
    source = args.weights
    if source is None and directory and any(f.endswith(".safetensors") for f in os.listdir(directory)):
        source = directory
    params = load_weights(source, model.param_types, args.dtype, config, args.seed, device="cuda")
    runner = OnGPU(model, params)
    tokens = greedy(runner, prompt, args.tokens)
    for row in tokens:
        text = tokenizer.decode(row.tolist()) if tokenizer else ""
        out.write(",".join(map(str, row.tolist())) + (f"\t{text!r}" if text else "") + "\n")
    speeds = [irforge_speed(runner, prompt)]
    if not args.no_compare:
        lm = hf_model(config, params, args.dtype, "cuda")
        speeds.append(hf_speed(lm, prompt, "HF eager"))
        lm.forward = torch.compile(lm.forward, mode="reduce-overhead", fullgraph=True)
        speeds.append(hf_speed(lm, prompt, "torch.compile"))
    for s in speeds:
        out.write(
            f"{s.system:>14}: prefill {s.prefill_tokens_per_s:10.1f} tokens/s ({s.prefill_ms:.2f} ms),"
            f" decode {s.decode_tokens_per_s:8.1f} tokens/s ({s.decode_ms:.3f} ms per step)\n"
        )
    nbytes = decode_bytes(params, args.batch, len(ids), config, torch.finfo(params[next(iter(params))].dtype).bits // 8)
    limit_ms = nbytes / copy_bandwidth() * 1e3
    out.write(
        f"decode bandwidth limit: {nbytes / 1e6:.1f} MB per step, {limit_ms:.3f} ms at the measured copy bandwidth;"
        f" irforge reaches {100 * limit_ms / speeds[0].decode_ms:.0f}% of it\n"
    )
    return 0
