"""GPU smoke test: the whole backend on the device, in one process, verbose on failure.

Reports the device and toolchain; then for each hand-written kernel-level example (irforge.dialects.kernel.examples
at GPU sizes): lowers it with kernel-to-cuda, compiles it with NVRTC to a CUBIN for the device, loads and launches
it on random data (synchronising and checking the driver's status after every launch), compares the result with
float64 numpy and with torch, and times it; then runs every scalar op and cast of the prelude against the kernel
simulator, and one program as a replayed CUDA graph. Prints a short table last; exits 1 if anything failed.
Writes the emitted CUDA and a JSON log to $OUT (or bench/results).

    python3 bench/gpu_smoke.py            # add --quick to skip the scalar-op sweep
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path


def log(*a) -> None:
    print(*a, flush=True)


def environment() -> dict:
    env = {"python": platform.python_version()}
    import torch

    env["torch"] = torch.__version__
    env["torch.cuda"] = torch.cuda.is_available()
    import cuda.bindings

    env["cuda-bindings"] = cuda.bindings.__version__
    from irforge.runtime import driver, nvrtc

    env["has_gpu"] = driver.has_gpu()
    env["nvrtc"] = ".".join(map(str, nvrtc.nvrtc_version()))
    env["libnvrtc"] = nvrtc.loaded_library()
    env["cuda headers"] = nvrtc.include_dirs()
    if env["has_gpu"]:
        env["device"] = driver.device_name()
        env["compute capability"] = ".".join(map(str, driver.compute_capability()))
        env["driver supports CUDA"] = driver.driver_version()
        env["SMs"] = driver.device_attribute("MULTIPROCESSOR_COUNT")
        env["smem per block (opt-in)"] = driver.device_attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
        env["arch"] = nvrtc.default_arch()
    return env


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="skip the scalar-op sweep")
    ap.add_argument("--out", default=os.environ.get("OUT") or "bench/results")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import numpy as np

    try:
        env = environment()
    except Exception:
        log("could not read the environment:\n" + traceback.format_exc())
        return 1
    for k, v in env.items():
        log(f"{k:>26}: {v}")
    if not env.get("has_gpu") or not env.get("torch.cuda"):
        log("no usable GPU (has_gpu() or torch.cuda.is_available() is False): nothing to run")
        return 1

    from irforge.dialects.kernel import examples

    from irforge.runtime import selfcheck
    from irforge.runtime.nvrtc import compile_cuda

    rows, sources, ok_all = [], [], True
    rng = np.random.default_rng(2026)
    for ex in examples.gpu_examples():
        log(f"--- {ex.name}")
        t0 = time.perf_counter()
        try:
            module = selfcheck.lower(ex.ir, f"{ex.name}.ir")
            k = module.body.ops[0]
            sources.append(f"// ===== {ex.name} =====\n{k.attributes['source']}")
            cubin = compile_cuda(k.attributes["source"], k.attributes["sym_name"], use_cache=False)
            log(
                f"    NVRTC: {len(cubin.image)} bytes of CUBIN for {cubin.arch} in {time.perf_counter() - t0:.2f}s"
                + (f"\n    log: {cubin.log}" if cubin.log else "")
            )
            c = selfcheck.check_example(ex, rng, time_it=True)
            gbps = ex.bytes_moved / (c.ms / 1e3) / 1e9 if c.ms == c.ms else float("nan")
            res = c.extra.get("resources", {})
            log(
                f"    error vs float64 numpy {c.error:.2e} (tolerance {ex.rtol:.0e}) {c.detail}; {c.ms * 1e3:.1f} us,"
                f" {gbps:.0f} GB/s; {res}"
            )
            rows.append((ex.name, c.ok, f"{c.error:.1e}", f"{c.ms * 1e3:.1f}", f"{gbps:.0f}", c.detail))
            ok_all &= c.ok
        except Exception as e:
            ok_all = False
            log(f"    FAILED: {type(e).__name__}: {e}")
            render = getattr(e, "render", None)
            if render is not None:
                log(render())
            log(traceback.format_exc())
            rows.append((ex.name, False, "-", "-", "-", f"{type(e).__name__}: {str(e)[:60]}"))

    log("--- CUDA graph replay")
    try:
        import torch

        from irforge.runtime import Executor

        ex = examples.softmax(1024, 2048, "bf16")
        m = selfcheck.lower(ex.ir)
        (x,) = ex.make_inputs(rng)
        xt = torch.from_numpy(x).cuda().bfloat16()
        a = Executor(m)(xt)[0].clone()
        b = Executor(m, use_graph=True)(xt)[0].clone()
        same = bool(torch.equal(a, b))
        rows.append(("graph replay", same, "-", "-", "-", "identical to plain launches" if same else "differs"))
        ok_all &= same
    except Exception as e:
        ok_all = False
        log(traceback.format_exc())
        rows.append(("graph replay", False, "-", "-", "-", f"{type(e).__name__}: {str(e)[:60]}"))

    scalar = []
    if not args.quick:
        log("--- every scalar op and cast vs the simulator")
        try:
            scalar = selfcheck.all_scalar_checks()
            bad = [c for c in scalar if not c.ok]
            for c in bad:
                log(f"    {c.name}: {c.error} {c.detail}")
            rows.append((f"scalar ops ({len(scalar)})", not bad, "-", "-", "-", f"{len(bad)} differ"))
            ok_all &= not bad
        except Exception as e:
            ok_all = False
            log(traceback.format_exc())
            rows.append(("scalar ops", False, "-", "-", "-", f"{type(e).__name__}: {str(e)[:60]}"))

    (out / "gpu_smoke_kernels.cu.txt").write_text("\n".join(sources))
    (out / "gpu_smoke.json").write_text(
        json.dumps(
            {
                "environment": env,
                "rows": [dict(zip(("name", "ok", "error", "us", "GB/s", "note"), r)) for r in rows],
                "scalar": [{"name": c.name, "ok": c.ok, "error": c.error, "detail": c.detail} for c in scalar],
            },
            indent=2,
            default=str,
        )
    )
    log("")
    log(f"{'check':<26} {'ok':<5} {'rel err':>8} {'us':>9} {'GB/s':>6}  note")
    for name, ok, err, us, gbps, note in rows:
        log(f"{name:<26} {'yes' if ok else 'NO':<5} {err:>8} {us:>9} {gbps:>6}  {note}")
    log("ALL OK" if ok_all else "SOME CHECKS FAILED")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
