"""`irforge generate MODEL`: greedy decoding with a compiled model, on the GPU (or the CPU's reference interpreters
with --interpret), against HF's greedy tokens and speed."""

from __future__ import annotations

import os

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
    """Greedy decoding with a compiled model: the tokens, whether HF's greedy tokens are the same, and (on the GPU)
    prefill and decode speed beside HF eager's and torch.compile's and the decode bandwidth limit."""
    import json

    from .configs import load_config, model_dir
    from .generate import Interpreted, greedy, hf_greedy, hf_model
    from .weights import load_weights

    config = load_config(args.model)
    directory = model_dir(args.model)
    ids, tokenizer = prompt_ids(args, directory)
    if args.tokens < 1:
        raise error(f"-n must be at least 1, got {args.tokens}")
    model = _compiled(args, config, len(ids), err)
    prompt = np.array([ids] * model.batch, dtype=np.int64)
    source = args.weights
    if source is None and directory and any(f.endswith(".safetensors") for f in os.listdir(directory)):
        source = directory
    device = "cpu" if args.interpret else "cuda"
    params = load_weights(source, model.param_types, model.dtype, model.config, args.seed, device=device)
    if args.interpret:
        runner = Interpreted(model, params)
    else:
        from .gpu import OnGPU

        runner = OnGPU(model, params)
    tokens = greedy(runner, prompt, args.tokens)
    for row in tokens:
        text = tokenizer.decode(row.tolist()) if tokenizer else ""
        out.write(",".join(map(str, row.tolist())) + (f"\t{text!r}" if text else "") + "\n")
    report = {
        "model": args.model,
        "compile": model.summary(),
        "dtype": model.dtype,
        "prompt": prompt.tolist(),
        "tokens": tokens.tolist(),
    }
    lm = None
    if not args.no_compare:
        lm = hf_model(model.config, params, model.dtype, device)
        ref = hf_greedy(lm, prompt, args.tokens)
        report.update(hf_tokens=ref.tolist(), match=bool((ref == tokens).all()))
        out.write(f"HF eager's greedy tokens: {agreement(tokens, ref)}\n")
    if not args.interpret:
        report.update(_speeds(args, runner, prompt, params, model, lm, out))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    return 0


def _compiled(args, config, prompt_len: int, err):
    """The model to run: compiled for this prompt and -n (at the loop level with --interpret), or the one saved in
    --compiled, checked to fit."""
    from . import compile_model, load_compiled

    level = "loop" if args.interpret else "cuda"
    if args.compiled is None:
        model = compile_model(
            config,
            dtype=args.dtype or "f32",
            batch=args.batch or 1,
            prompt_len=prompt_len,
            max_len=prompt_len + args.tokens,
            level=level,
            tuning=args.tuning,
        )
        err.write(model.summary() + "\n")
        return model
    model = load_compiled(args.compiled)
    where = f"'{args.compiled}' was compiled"
    for key in ("model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers"):
        if getattr(model.config, key) != getattr(config, key):
            mine, theirs = getattr(model.config, key), getattr(config, key)
            raise error(f"{where} for another model: its {key} is {mine}, {args.model}'s is {theirs}")
    for flag, have, want in (("--dtype", model.dtype, args.dtype), ("--batch", model.batch, args.batch)):
        if want is not None and want != have:
            raise error(f"{where} for {flag} {have}, not {want}")
    if model.prompt_len != prompt_len:
        raise error(f"{where} for a prompt of {model.prompt_len} token(s); this prompt has {prompt_len}")
    if model.max_len < prompt_len + args.tokens - 1:
        raise error(f"{where} with a cache of {model.max_len} tokens: too short for {args.tokens} new tokens")
    if args.interpret and model.level == "cuda":
        raise error(f"{where} to the cuda level, which has no interpreter: --interpret runs one saved with --ir loop")
    if not args.interpret and model.level != "cuda":
        raise error(f"{where} to the {model.level} level; on the GPU, generate runs one saved with --ir cuda")
    return model


def agreement(ours: np.ndarray, ref: np.ndarray) -> str:
    """`identical (B x N tokens)`, or where the first sequence that differs first differs."""
    if (ours == ref).all():
        return f"identical ({ours.shape[0]} x {ours.shape[1]} tokens)"
    b = int(np.argmax((ours != ref).any(axis=1)))
    t = int(np.argmax(ours[b] != ref[b]))
    return f"DIFFERENT: sequence {b} from token {t} (irforge {ours[b, t]}, HF {ref[b, t]})"


def _speeds(args, runner, prompt, params, model, lm, out) -> dict:
    """Time irforge (and HF eager and torch.compile unless told not to); print them and the bandwidth limit."""
    from .hf import DTYPES
    from .speed import as_dict, compiled_speed, copy_bandwidth, decode_bytes, hf_speed, irforge_speed

    speeds = [irforge_speed(runner, prompt)]
    if lm is not None:
        speeds.append(hf_speed(lm, prompt))
        if not args.no_torch_compile:
            speeds.append(compiled_speed(lm, prompt))
    for s in speeds:
        out.write(
            f"{s.system:>14}: prefill {s.prefill_tokens_per_s:10.1f} tokens/s ({s.prefill_ms:.2f} ms),"
            f" decode {s.decode_tokens_per_s:8.1f} tokens/s ({s.decode_ms:.3f} ms per step)\n"
        )
    b, s = prompt.shape
    nbytes = decode_bytes(params, b, s, model.config, DTYPES[model.dtype].itemsize)
    bandwidth = copy_bandwidth()
    limit_ms = nbytes / bandwidth * 1e3
    fraction = limit_ms / speeds[0].decode_ms
    out.write(
        f"decode bandwidth limit: {nbytes / 1e6:.1f} MB per step, {limit_ms:.3f} ms at the measured copy bandwidth;"
        f" irforge reaches {100 * fraction:.0f}% of it\n"
    )
    return {
        "speeds": [as_dict(s) for s in speeds],
        "decode_bytes": nbytes,
        "copy_bandwidth_bytes_per_s": bandwidth,
        "decode_fraction_of_bandwidth_limit": fraction,
    }
