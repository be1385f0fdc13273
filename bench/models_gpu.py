"""Whole models on the GPU through `irforge generate`, checked against HF transformers and timed (the GPU half of
tests/test_models.py). Random weights from the configs: nothing is downloaded.

    python bench/models_gpu.py compile --dir build/models            # any machine (CPU): compile, NVRTC
    python bench/models_gpu.py run --dir build/models --out OUT       # the GPU: check, time, write JSON under OUT

`compile` writes two tiny configs (Llama and Qwen2: 3 layers, hidden 64), compiles every case below to the cuda level
(`irforge.models.save_compiled`, under DIR) and fills the NVRTC cubin cache (DIR/cache), so that `run` spends its
GPU time running; `run` compiles whatever is missing. Then, with TF32 off:

1. `irforge generate` (the command itself, with `--compiled`) on the tiny configs (f32, batch 2), TinyLlama-1.1B and
   SmolLM2-135M (f32): 32 greedy tokens identical to HF's greedy tokens with the same weights; TinyLlama-1.1B in
   bf16: its tokens beside HF's, and the timings: prefill and decode (the decode step a CUDA graph) vs HF eager and
   torch.compile, and the fraction of the decode bandwidth limit;
2. TinyLlama-1.1B and SmolLM2-135M in bf16: at each step (the prefill, then 31 decode steps fed HF's tokens) the
   logits within 2e-2 of HF's, relative to the largest HF logit (the check); beside it, whether irforge is no
   further from HF in fp32 (the same weights) than 1.25 times HF bf16's own distance to it (HF's own bf16 noise);
3. Qwen2.5-7B in bf16: a prefill of 512 tokens, its logits within 2e-2 of HF's, timed;
4. TinyLlama-1.1B bf16: a prefill of 512 tokens vs HF eager;
5. with --profile [CASE ...] (none named: the same model), each case's decode step (after its prompt) and prefill
   kernel by kernel: each kernel's launch shape, bytes, the floor of those bytes at the measured copy bandwidth
   and its measured time (irforge.models.profile), sorted by total time.

Every `irforge generate` writes OUT/generate-<case>.json; OUT/models-<gpu>.json has every check, every timing and
the environment. Exit 1 when a check fails.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import io
import json
import os
import re
import sys
import time
import traceback

import numpy as np

TINY = {"hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 3, "num_attention_heads": 4}
TINY.update(num_key_value_heads=2, vocab_size=128, max_position_embeddings=64, initializer_range=0.3)

CASES = {  # name: (model, dtype, batch, prompt tokens, new tokens); "tiny-*" are directories under --dir
    "tiny-llama-f32": ("tiny-llama", "f32", 2, 8, 32),
    "tiny-qwen2-f32": ("tiny-qwen2", "f32", 2, 8, 32),
    "tinyllama-f32": ("tinyllama-1.1b", "f32", 1, 16, 32),
    "smollm2-f32": ("smollm2-135m", "f32", 1, 16, 32),
    "tinyllama-bf16": ("tinyllama-1.1b", "bf16", 1, 16, 32),
    "smollm2-bf16": ("smollm2-135m", "bf16", 1, 16, 32),
    "tinyllama-bf16-prefill512": ("tinyllama-1.1b", "bf16", 1, 512, 16),
    "qwen2.5-7b-prefill512": ("qwen2.5-7b", "bf16", 1, 512, 1),
}
GENERATE = ["tiny-llama-f32", "tiny-qwen2-f32", "tinyllama-f32", "smollm2-f32", "tinyllama-bf16"]
LOGITS = ["tinyllama-bf16", "smollm2-bf16", "qwen2.5-7b-prefill512"]
REL_TOL = 2e-2
TUNING: str | None = None  # --db: the tuning database the models compile with (None: the heuristics' schedules)
# bf16 past REL_TOL of HF's logits: irforge's distance to HF in fp32 at most this much over HF bf16's own (a
# 22-layer model's bf16 noise is about REL_TOL: HF's SDPA and eager attention differ by 0.022-0.027, docs/models.md)
F32_MARGIN = 1.25
PROFILE = "tinyllama-bf16-prefill512"  # --profile: its decode step is the one `prefill_speed` times


def model_spec(directory: str, case: str) -> str:
    name = CASES[case][0]
    return os.path.join(directory, name) if name.startswith("tiny-") else name


def write_tiny_configs(directory: str) -> None:
    for kind in ("llama", "qwen2"):
        d = os.path.join(directory, f"tiny-{kind}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as f:
            json.dump({"model_type": kind, **TINY}, f)


def compiled(directory: str, case: str):
    from irforge.models import compile_model, load_compiled, save_compiled

    path = os.path.join(directory, f"{case}.json")
    if os.path.exists(path):
        return load_compiled(path)
    _, dtype, batch, prompt, new = CASES[case]
    model = compile_model(
        model_spec(directory, case),
        dtype=dtype,
        batch=batch,
        prompt_len=prompt,
        max_len=prompt + new,
        tuning=TUNING,
    )
    print(f"{case}: {model.summary()}", flush=True)
    save_compiled(model, path)
    return model


def prompt_of(model) -> np.ndarray:
    return np.random.default_rng(0).integers(0, model.config.vocab_size, (model.batch, model.prompt_len))


def rel_error(got, want) -> float:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def norm_error(got, want) -> float:
    """The relative error by norm, as `irforge bench` checks every result (information beside `rel_error`)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def generate_case(directory: str, out: str, case: str, torch_compile: bool) -> dict:
    """`irforge generate` on the case's compiled model; f32 cases must give HF's tokens."""
    from irforge.tools.cli import main

    model = compiled(directory, case)
    _, dtype, _, _, new = CASES[case]
    ids = ",".join(map(str, prompt_of(model)[0]))
    path = os.path.join(out, f"generate-{case}.json")
    argv = ["generate", model_spec(directory, case), "--ids", ids, "-n", str(new), "--batch", str(model.batch)]
    argv += ["--dtype", dtype, "--compiled", os.path.join(directory, f"{case}.json"), "--json", path]
    if not (torch_compile and case == "tinyllama-bf16"):
        argv.append("--no-torch-compile")
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(argv, stdout=stdout, stderr=stderr)
    print(f"$ irforge {' '.join(argv)}\n{stdout.getvalue()}{stderr.getvalue()}", flush=True)
    if code != 0:
        return {"case": case, "ok": False, "error": stderr.getvalue()}
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    ok = report["match"] or dtype != "f32"  # bf16 tokens may part at near ties: its check is the logits'
    return {"case": case, "command": "irforge " + " ".join(argv), "ok": ok, **report}


def logits_case(directory: str, case: str) -> dict:
    """Each step's logits (the prefill, then the decode steps fed HF's tokens) within REL_TOL of HF's (`ok`); beside
    them irforge's and HF bf16's distance to HF in fp32 (the same bf16 weights), HF's own bf16 noise, and whether
    irforge is within F32_MARGIN times that noise (`within_hf_bf16_noise`: information, not the check)."""
    import torch

    from irforge.models.generate import hf_greedy, hf_model, hf_step_logits
    from irforge.models.gpu import OnGPU
    from irforge.models.speed import cuda_time
    from irforge.models.weights import load_weights

    model = compiled(directory, case)
    _, dtype, _, prompt_len, new = CASES[case]
    params = load_weights(None, model.param_types, dtype, model.config, seed=0, device="cuda")
    prompt = prompt_of(model)
    runner = OnGPU(model, params)
    lm = hf_model(model.config, params, dtype, "cuda")
    ref = hf_greedy(lm, prompt, new)
    want = hf_step_logits(lm, prompt, ref[:, : new - 1])
    got = [runner("prefill", prompt, np.arange(prompt_len)).cpu().numpy()]
    for t in range(new - 1):
        got.append(runner("decode", ref[:, t : t + 1], np.array([prompt_len + t])).cpu().numpy())
    errs = [rel_error(g, w) for g, w in zip(got, want)]
    row = {"case": case, "dtype": dtype, "prompt": prompt_len, "compile": model.summary()}
    row.update(max_rel_error=max(errs), per_step=errs, max_norm_error=max(map(norm_error, got, want)))
    # HF's own implementation noise: the same bf16 model with eager attention in place of SDPA
    lm.set_attn_implementation("eager")
    other = hf_step_logits(lm, prompt, ref[:, : new - 1])
    lm.set_attn_implementation("sdpa")
    row.update(hf_eager_vs_sdpa=max(map(rel_error, other, want)))
    row.update(hf_eager_vs_sdpa_norm=max(map(norm_error, other, want)))
    if new == 1:  # a prefill case: its time too
        row["irforge_prefill_ms"] = cuda_time(lambda: runner("prefill", prompt, np.arange(prompt_len)), reps=5)
        ids = torch.as_tensor(prompt, device="cuda")
        with torch.no_grad():
            row["hf_eager_prefill_ms"] = cuda_time(lambda: lm(input_ids=ids, logits_to_keep=1), reps=5)
    lm = runner = None  # their memory, before the fp32 model
    gc.collect()
    torch.cuda.empty_cache()
    exact = hf_step_logits(hf_model(model.config, params, "f32", "cuda"), prompt, ref[:, : new - 1])
    ours = [rel_error(g, x) for g, x in zip(got, exact)]
    theirs = [rel_error(w, x) for w, x in zip(want, exact)]
    row.update(per_step_vs_f32=ours, hf_per_step_vs_f32=theirs, max_vs_f32=max(ours), hf_max_vs_f32=max(theirs))
    row.update(max_norm_vs_f32=max(map(norm_error, got, exact)), hf_max_norm_vs_f32=max(map(norm_error, want, exact)))
    row.update(ok=max(errs) <= REL_TOL, within_hf_bf16_noise=max(ours) <= F32_MARGIN * max(theirs))
    return row


def prefill_speed(directory: str) -> dict:
    from irforge.models.generate import hf_model
    from irforge.models.gpu import OnGPU
    from irforge.models.speed import as_dict, hf_speed, irforge_speed
    from irforge.models.weights import load_weights

    case = "tinyllama-bf16-prefill512"
    model = compiled(directory, case)
    params = load_weights(None, model.param_types, "bf16", model.config, seed=0, device="cuda")
    prompt = prompt_of(model)
    ours = irforge_speed(OnGPU(model, params), prompt)
    eager = hf_speed(hf_model(model.config, params, "bf16", "cuda"), prompt, "HF eager")
    return {
        "case": case,
        "systems": [as_dict(ours), as_dict(eager)],
        "prefill_vs_eager": eager.prefill_ms / ours.prefill_ms,
    }


def profile_case(directory: str, case: str) -> dict:
    """Per-kernel times of the decode step (at the position after the prompt, where `irforge generate` times it)
    and of the prefill, each launch against the floor of its bytes (irforge.models.profile)."""
    import torch

    from irforge.models.gpu import OnGPU
    from irforge.models.profile import kernels, launch_times, table
    from irforge.models.speed import copy_bandwidth, cuda_time
    from irforge.models.weights import load_weights

    model = compiled(directory, case)
    _, dtype, batch, prompt_len, _ = CASES[case]
    params = load_weights(None, model.param_types, dtype, model.config, seed=0, device="cuda")
    runner = OnGPU(model, params)
    prompt = prompt_of(model)
    bandwidth = copy_bandwidth()
    row = {"case": case, "copy_bandwidth_bytes_per_s": bandwidth}
    steps = {
        "decode": (torch.zeros((batch, 1), dtype=torch.long, device="cuda"), torch.tensor([prompt_len], device="cuda")),
        "prefill": (torch.as_tensor(prompt, device="cuda"), torch.arange(prompt_len, device="cuda")),
    }
    runner("prefill", prompt, np.arange(prompt_len))
    for name, (ids, pos) in steps.items():
        ex = runner.executors[name]
        rows = kernels(ex.program.parent_op)
        times = launch_times(runner, name, ids, pos)
        whole_ms = cuda_time(lambda: ex(ids, pos), reps=10)
        how = "as a CUDA graph" if ex.use_graph else "eagerly"
        print(f"{case} {name} step: {whole_ms:.3f} ms {how}\n{table(rows, bandwidth, times)}", flush=True)
        row[name] = {
            "step_ms": whole_ms,
            "graph": ex.use_graph,
            "kernels": [{**k.__dict__, "floor_ms": k.nbytes / bandwidth * 1e3} for k in rows],
            "launch_ms": times,
        }
    return row


def environment() -> dict:
    import torch
    import transformers

    from irforge.bench.harness import git_revision
    from irforge.runtime import driver

    rev = git_revision()
    return {
        "gpu": driver.device_name(),
        "driver": driver.driver_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "irforge": rev,
        "date": datetime.date.today().isoformat(),
        "tuning_db": TUNING,
    }


def timed(rows: list, what: str, fn, *args) -> bool:
    """Run one check; its failure (an exception included) is a result, reported with the rest."""
    import torch

    t = time.perf_counter()
    try:
        row = fn(*args)
    except Exception as e:
        row = {"case": what, "ok": False, "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
    row["seconds"] = time.perf_counter() - t
    gc.collect()  # the case's models and weights, before the next case's
    torch.cuda.empty_cache()
    rows.append(row)
    shown = {
        k: v
        for k, v in row.items()
        if k not in ("trace", "prompt", "tokens", "hf_tokens", "decode", "prefill")
        and not k.startswith(("per_step", "hf_per_step"))
    }
    print(json.dumps(shown), flush=True)
    return row.get("ok", True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("phase", choices=["compile", "run"])
    ap.add_argument("--dir", default="build/models", help="where the compiled models and the cubin cache are kept")
    ap.add_argument("--out", default="build/models/results", help="where `run` writes its JSON")
    ap.add_argument("--only", nargs="*", choices=list(CASES), help="only these cases")
    ap.add_argument("--no-torch-compile", action="store_true", help="time HF eager only")
    ap.add_argument(
        "--profile",
        nargs="*",
        choices=list(CASES),
        metavar="CASE",
        help=f"per-kernel times of these cases' decode and prefill (none named: {PROFILE})",
    )
    ap.add_argument("--db", help="compile replaying this tuning database's winners (`irforge tune MODEL`)")
    args = ap.parse_args()
    global TUNING
    TUNING = os.path.abspath(args.db) if args.db else None
    os.environ["IRFORGE_CACHE_DIR"] = os.environ.get("IRFORGE_CACHE_DIR") or os.path.join(args.dir, "cache")
    os.makedirs(args.dir, exist_ok=True)
    write_tiny_configs(args.dir)
    cases = args.only or list(CASES)
    profiled = [] if args.profile is None else args.profile or [PROFILE]
    cases += [c for c in profiled if c not in cases]
    if args.phase == "compile":
        from irforge.diagnostics import IRForgeError

        failed = []
        for case in cases:
            try:
                compiled(args.dir, case)
            except IRForgeError as e:
                print(f"{case}: does not compile: {e.render()}", flush=True)
                failed.append(case)
        return 1 if failed else 0
    import torch

    from irforge.runtime import has_gpu

    if not has_gpu():
        print("models_gpu.py run: no CUDA GPU is visible here", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(args.out, exist_ok=True)
    report: dict = {"environment": environment(), "generate": [], "logits": [], "prefill": [], "profile": []}
    ok = True
    for case in [c for c in GENERATE if c in cases]:
        ok &= timed(report["generate"], case, generate_case, args.dir, args.out, case, not args.no_torch_compile)
    for case in [c for c in LOGITS if c in cases]:
        ok &= timed(report["logits"], case, logits_case, args.dir, case)
    if "tinyllama-bf16-prefill512" in cases:
        ok &= timed(report["prefill"], "tinyllama-bf16-prefill512", prefill_speed, args.dir)
    for case in profiled:
        ok &= timed(report["profile"], case, profile_case, args.dir, case)
    found = re.search(r"\b([A-Z]\d{2,4})\b", report["environment"]["gpu"] or "")
    gpu = found.group(1).lower() if found else "gpu"  # "NVIDIA H100 80GB HBM3" -> h100
    path = os.path.join(args.out, f"models-{gpu}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    print(f"wrote {path}; {'all checks pass' if ok else 'SOME CHECKS FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
