"""Whole models on the GPU, checked against HF transformers and timed (the GPU half of tests/test_models.py).

    python bench/models_gpu.py compile --dir /tmp/irforge-models     # on any machine (CPU): compile, NVRTC
    python bench/models_gpu.py run --dir /tmp/irforge-models         # on the GPU: check, time, write the JSON

`compile` writes each model the checks need (JSON, `irforge.models.save_compiled`) and fills the NVRTC cubin
cache ($IRFORGE_CACHE_DIR); `run` loads them (compiling any that are missing) and checks, with random weights:

1. TinyLlama-1.1B and SmolLM2-135M in f32 (TF32 off): 32 greedy tokens identical to HF's;
2. the same models in bf16: at each step (the prefill, then 31 decode steps fed HF's tokens) the logits within 2e-2
   of HF's, relative to the largest HF logit;
3. Qwen2.5-7B in bf16: a prefill of 512 tokens, its logits within 2e-2 of HF's;
4. speed: TinyLlama-1.1B bf16, batch 1: decode tokens/s (the decode step a CUDA graph) vs HF eager and
   torch.compile, and the fraction of the decode bandwidth limit; the prefill of 512 tokens vs HF eager.

The results go to bench/results/models-<gpu>-<date>.json (every check, every time, the environment). Exit 1 when
a check fails.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
import traceback

import numpy as np

CASES = {  # name: (model, dtype, prompt tokens, new tokens)
    "tinyllama-f32": ("tinyllama-1.1b", "f32", 16, 32),
    "smollm2-f32": ("smollm2-135m", "f32", 16, 32),
    "tinyllama-bf16": ("tinyllama-1.1b", "bf16", 16, 32),
    "smollm2-bf16": ("smollm2-135m", "bf16", 16, 32),
    "qwen2.5-7b-prefill512": ("qwen2.5-7b", "bf16", 512, 1),
    "tinyllama-bf16-prefill512": ("tinyllama-1.1b", "bf16", 512, 16),
}
REL_TOL = 2e-2


def compiled(directory: str, case: str):
    from irforge.models import compile_model, load_compiled, save_compiled

    path = os.path.join(directory, f"{case}.json")
    if os.path.exists(path):
        return load_compiled(path)
    spec, dtype, prompt, new = CASES[case]
    t = time.perf_counter()
    model = compile_model(spec, dtype=dtype, prompt_len=prompt, max_len=prompt + new)
    print(f"{case}: compiled in {time.perf_counter() - t:.1f} s: {model.summary()}", flush=True)
    os.makedirs(directory, exist_ok=True)
    save_compiled(model, path)
    return model


def rel_error(got, want) -> float:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def check_case(directory: str, case: str) -> dict:
    import torch

    from irforge.models.generate import greedy, hf_greedy, hf_model, hf_step_logits
    from irforge.models.gpu import OnGPU
    from irforge.models.weights import load_weights

    _, dtype, prompt_len, new = CASES[case]
    model = compiled(directory, case)
    params = load_weights(None, model.param_types, dtype, model.config, seed=0, device="cuda")
    prompt = np.random.default_rng(0).integers(0, model.config.vocab_size, (1, prompt_len))
    runner = OnGPU(model, params)
    lm = hf_model(model.config, params, dtype, "cuda")
    row: dict = {"case": case, "dtype": dtype, "prompt": prompt_len, "compile": model.summary()}
    if dtype == "f32":
        ours, ref = greedy(runner, prompt, new), hf_greedy(lm, prompt, new)
        row.update(irforge=ours[0].tolist(), hf=ref[0].tolist(), ok=bool((ours == ref).all()))
    else:
        ref = hf_greedy(lm, prompt, new)
        want = hf_step_logits(lm, prompt, ref[:, : new - 1])
        runner.reset()
        got = [runner("prefill", prompt, np.arange(prompt_len)).cpu().numpy()]
        for t in range(new - 1):
            got.append(runner("decode", ref[:, t : t + 1], np.array([prompt_len + t])).cpu().numpy())
        errs = [rel_error(g, w) for g, w in zip(got, want)]
        row.update(max_rel_error=max(errs), per_step=errs, ok=max(errs) <= REL_TOL)
    del lm
    torch.cuda.empty_cache()
    return row


def speed(directory: str, with_compile: bool) -> dict:
    import torch

    from irforge.models.generate import hf_model
    from irforge.models.gpu import OnGPU
    from irforge.models.speed import as_dict, copy_bandwidth, decode_bytes, hf_speed, irforge_speed
    from irforge.models.weights import load_weights

    out = {}
    for case in ("tinyllama-bf16", "tinyllama-bf16-prefill512"):
        model = compiled(directory, case)
        params = load_weights(None, model.param_types, "bf16", model.config, seed=0, device="cuda")
        prompt = np.random.default_rng(0).integers(0, model.config.vocab_size, (1, model.prompt_len))
        runner = OnGPU(model, params)
        rows = [irforge_speed(runner, prompt)]
        lm = hf_model(model.config, params, "bf16", "cuda")
        rows.append(hf_speed(lm, prompt, "HF eager"))
        if with_compile and case == "tinyllama-bf16":
            lm.forward = torch.compile(lm.forward, mode="reduce-overhead", fullgraph=True)
            rows.append(hf_speed(lm, prompt, "torch.compile"))
        nbytes = decode_bytes(params, 1, model.prompt_len, model.config, 2)
        bw = copy_bandwidth()
        limit_ms = nbytes / bw * 1e3
        out[case] = {
            "systems": [as_dict(r) for r in rows],
            "decode_vs_eager": rows[1].decode_ms / rows[0].decode_ms,
            "prefill_vs_eager": rows[1].prefill_ms / rows[0].prefill_ms,
            "decode_bytes": nbytes,
            "copy_bandwidth_bytes_per_s": bw,
            "decode_fraction_of_bandwidth_limit": limit_ms / rows[0].decode_ms,
        }
        del lm, runner
        torch.cuda.empty_cache()
    return out


def environment() -> dict:
    import torch
    import transformers

    from irforge.runtime import driver

    rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {
        "gpu": driver.device_name(),
        "driver": driver.driver_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "irforge": rev,
        "date": datetime.date.today().isoformat(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("phase", choices=["compile", "run"])
    ap.add_argument("--dir", default="/tmp/irforge-models", help="where compiled models are kept")
    ap.add_argument("--only", nargs="*", choices=list(CASES), help="only these cases")
    ap.add_argument("--no-torch-compile", action="store_true", help="time HF eager only")
    args = ap.parse_args()
    cases = args.only or list(CASES)
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
    report = {"environment": environment(), "checks": [], "speed": None}
    ok = True
    for case in [c for c in cases if not c.endswith("-prefill512") or c.startswith("qwen")]:
        try:
            row = check_case(args.dir, case)
        except Exception as e:  # one case's failure is a result, reported with the rest
            row = {"case": case, "ok": False, "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
        ok &= row["ok"]
        print(json.dumps({k: v for k, v in row.items() if k not in ("trace", "per_step")}), flush=True)
        report["checks"].append(row)
    try:
        report["speed"] = speed(args.dir, not args.no_torch_compile)
        print(json.dumps(report["speed"], indent=1), flush=True)
    except Exception as e:
        report["speed"] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
        ok = False
    found = re.search(r"\b([A-Z]\d{2,4})\b", report["environment"]["gpu"] or "")
    gpu = found.group(1).lower() if found else "gpu"  # "NVIDIA H100 80GB HBM3" -> h100
    path = os.path.join(os.path.dirname(__file__), "results", f"models-{gpu}-{report['environment']['date']}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    print(f"wrote {path}; {'all checks pass' if ok else 'SOME CHECKS FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
