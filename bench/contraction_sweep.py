"""The contraction schedule sweep: products through the tile passes at several option points, against cuBLAS.

    python bench/contraction_sweep.py prepare DIR [--shapes ...] [--variants ...] [--dtypes f32,bf16,f16] [--jobs N]
    python bench/contraction_sweep.py run DIR [-o OUT.json]                          # on the GPU: check and time

`prepare` writes each (shape, dtype, variant) as a cuda-level program (`DIR/<shape>.<dtype>__<variant>.ir`, the
text parses back) and fills the NVRTC cache (`DIR/cache`) so the GPU run compiles nothing; `run` checks each
program against torch (fp32 without TF32; bf16 and f16 as cuBLAS computes them: f32 accumulation) on random
inputs, then times it and `torch.matmul` interleaved (CUDA events, L2 flushed, median), and prints a table
(TFLOP/s, % of cuBLAS, and the bytes moved per second, the measure of decode-shaped products). The variants are
pipelines: `default` is `loop-to-tile` as `torch-to-cuda` runs it; the others override tile pass options through
the pipeline text, as the tuner would (`plain`: without the shared-memory passes, `plain+X`: with one of them
back; `mma`, `wgmma...`, `simt`: the tensor-core atom forced). The shapes include the llm suite's linears L1-L14
(nn.Linear's products: the weight [N, K]); `--shapes 'L*'` picks them. A shape named `*.add` adds a residual
[M, N] to the product (seed84's matmul_add: cuBLAS's time is then eager's, the product and the add). `main` pins,
for the shapes in MAIN, the options main's heuristics chose at 6dccff8 (the baseline of the contract branch's
heuristic changes); elsewhere it is `default`.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
import time
from pathlib import Path

# (name, M, N, K, transposed B, residual): seed84 shapes (TinyLlama / Qwen2.5 projections) and two square ones.
SHAPES = {
    "TL.q.s512": (512, 2048, 2048, False, False),
    "TL.gate.s512": (512, 5632, 2048, False, False),
    "TL.down.s512": (512, 2048, 5632, False, False),
    "TL.kv.s512": (512, 256, 2048, False, False),
    "TL.q.s128": (128, 2048, 2048, False, False),
    "TL.gate.s128": (128, 5632, 2048, False, False),
    "TL.down.s128": (128, 2048, 5632, False, False),
    "TL.kv.s128": (128, 256, 2048, False, False),
    "TL.q.s32": (32, 2048, 2048, False, False),
    "TL.down.s32": (32, 2048, 5632, False, False),
    "TL.kv.s32": (32, 256, 2048, False, False),
    "QW.q.s512": (512, 3584, 3584, False, False),
    "QW.down.s128": (128, 3584, 18944, False, False),
    "QW.gate.s32": (32, 18944, 3584, False, False),
    "QW.down.s32": (32, 3584, 18944, False, False),
    "QW.kv.s32": (32, 512, 3584, False, False),
    "QW.q.s128": (128, 3584, 3584, False, False),
    # a decode step of a few sequences (TinyLlama's qkv projection, nn.Linear's weight)
    **{f"L5.b{b}": (b, 2560, 2048, True, False) for b in (2, 4, 8)},
    "QW.kv.s512": (512, 512, 3584, False, False),
    "TL.down.s512.add": (512, 2048, 5632, False, True),
    "TL.down.s128.add": (128, 2048, 5632, False, True),
    "QW.down.s128.add": (128, 3584, 18944, False, True),
    "sq.2048": (2048, 2048, 2048, False, False),
    "TL.q.s512.linear": (512, 2048, 2048, True, False),
    # products too small for wgmma's tiles to fill the GPU (nn.Linear's weight): Qwen2.5's k/v at 512 tokens, and
    # 64 and 192 rows
    "QW.kv.s512.linear": (512, 512, 3584, True, False),
    "M64.4096": (64, 4096, 4096, True, False),
    "M192.2048": (192, 2048, 1024, True, False),
}
# What main's heuristics chose at 6dccff8 where the contract branch's choose otherwise (tile-blockify's tile and
# threads, tile-split-reduce's splits): the `main` variant.
_S128_DOWN = dict(bm=64, bn=64, threads=64, splits=4)
MAIN = {
    "TL.kv.s32": dict(bm=32, bn=128, threads=64, splits=16),
    "QW.kv.s32": dict(bm=32, bn=128, threads=64, splits=16),
    "TL.kv.s128": dict(bm=64, bn=64, threads=64, splits=16),
    "QW.down.s32": dict(bm=32, bn=128, threads=64, splits=8),
    "TL.down.s128": _S128_DOWN,
    "QW.down.s128": _S128_DOWN,
    "TL.down.s128.add": _S128_DOWN,
    "QW.down.s128.add": _S128_DOWN,
}


def _llm_linears() -> dict:
    from irforge.bench.llm import LINEAR, projection

    out = {}
    for cid, (model, proj, tokens) in LINEAR.items():
        k, n = projection(model, proj)
        out[cid] = (tokens, n, k, True, False)
    return out


SHAPES |= _llm_linears()
# Gated products (a SwiGLU MLP's gate and up projections in one kernel, nn.Linear's weights): silu(x @ wgᵀ) *
# (x @ wuᵀ), (M, N, K) — the fused kernel of the models' prefill (Qwen2.5-7B's and TinyLlama's MLPs).
GATED = {
    "QW.gate_up.s512": (512, 18944, 3584),
    "QW.gate_up.s2048": (2048, 18944, 3584),
    "TL.gate_up.s512": (512, 5632, 2048),
}


def _loop_to_tile() -> list[str]:
    """The passes of the `loop-to-tile` pipeline, in order."""
    text = (Path(__file__).parent.parent / "pipelines" / "loop-to-tile.pipeline").read_text()
    lines = [ln.split("#")[0].strip() for ln in text.splitlines()]
    return [p.strip() for p in " ".join(lines).split(",") if p.strip()]


def variant(bm=0, bn=0, threads=0, tm=0, tn=0, bk=0, stages=0, splits=0, rows=0, group_bytes=0, **more) -> str:
    """`loop-to-tile` with some options set, as the tuner would: the contraction schedule's (`rows` and
    `group_bytes` are tile-permute-lanes'), and any pass's by name (`tile_pad_smem="pad=0"`)."""
    opts = {
        "tile-blockify": {"bm": bm, "bn": bn, "threads": threads},
        "tile-register-tile": {"tm": tm, "tn": tn},
        "tile-permute-lanes": {"rows": rows, "group-bytes": group_bytes},
        "tile-chunk-reduce": {"bk": bk},
        "tile-split-reduce": {"splits": splits},
        "tile-multi-buffer": {"stages": stages},
    }
    text = {name: " ".join(f"{k}={v}" for k, v in kv.items() if v) for name, kv in opts.items()}
    text |= {name.replace("_", "-"): value for name, value in more.items()}
    return ",".join(p + ("{" + text[p] + "}" if text.get(p) else "") for p in _loop_to_tile())


# The shared-memory passes (tile-tma, -pad-smem, -swizzle-smem, -rasterize, -unroll) one at a time, against the
# schedule without any of them.
PLAIN = dict(tile_tma="stages=none", tile_pad_smem="pad=0", tile_swizzle_smem="swizzle=0,0,0",
             tile_rasterize="rows=1", tile_unroll="max-ops=1")  # fmt: skip
VARIANTS = {
    "default": variant(),
    "plain": variant(**PLAIN),
    "plain+tma": variant(**{**PLAIN, "tile_tma": "stages=auto"}),
    "plain+swizzle": variant(**{**PLAIN, "tile_swizzle_smem": ""}),
    "plain+pad": variant(**{**PLAIN, "tile_pad_smem": ""}),
    "plain+unroll": variant(**{**PLAIN, "tile_unroll": ""}),
    "no-tma": variant(tile_tma="stages=none"),
    # A's [64, 16] slab swizzled by row bits 3-4: a warp's four 8-row groups (rows 0, 8, 16, 24, 256 bytes apart)
    # read different bank groups. ncu counted 25% of shared-load wavefronts as conflicts on A's fragment, which
    # the bank model (quarter-warp phases for 16-byte reads) does not see; copied by the threads (the engine
    # cannot write this swizzle), against no-tma.
    "no-tma.aswz": variant(tile_tma="stages=none", tile_swizzle_smem="swizzle=2,2,5"),
    "tma-all": variant(tile_tma="stages=all"),
    "raster8": variant(tile_rasterize="rows=8"),
    "raster16": variant(tile_rasterize="rows=16"),
    **{f"split{n}": variant(splits=n) for n in (1, 2, 4, 8, 16, 32)},  # split-K around the heuristic's choice
    "fill.8x128.t256": variant(bm=8, threads=256),  # irforge tune's point on QW.kv.s32
    "warps4x8": variant(rows=4),  # tile-permute-lanes' 4 x 8 warps: A's rows swizzled apart (sweep 2 had them clash)
    "warps4x8.plain": variant(rows=4, **PLAIN),
    "64x128": variant(bm=64, bn=128, threads=128, tm=8, tn=8, splits=1),
    "64x128.nosplit": variant(bm=64, bn=128, threads=128, tm=8, tn=8, splits=1, group_bytes=4),
    "64x128.bk16": variant(bm=64, bn=128, threads=128, tm=8, tn=8, bk=16, splits=1),
    "64x128.bk32": variant(bm=64, bn=128, threads=128, tm=8, tn=8, bk=32, splits=1),
    "64x128.bk16.s4": variant(bm=64, bn=128, threads=128, tm=8, tn=8, bk=16, stages=4, splits=1),
    "64x128.s2": variant(bm=64, bn=128, threads=128, tm=8, tn=8, stages=2, splits=1),
    "128x128.t256": variant(bm=128, bn=128, threads=256, tm=8, tn=8, splits=1),
    "128x128.t256.bk16": variant(bm=128, bn=128, threads=256, tm=8, tn=8, bk=16, splits=1),
    "128x64.t128": variant(bm=128, bn=64, threads=128, tm=8, tn=8, splits=1),
    # the schedule rows under 8 took before they took all rows a block: 1 (or 8) rows x 128 of 8 x 8 tiles
    "rows1.t2": variant(bm=1, bn=128, threads=2),
    "rows8.t16": variant(bm=8, bn=128, threads=16),
    "64x64.t64": variant(bm=64, bn=64, threads=64, tm=8, tn=8, splits=1),
    "64x64.t64.split4": variant(bm=64, bn=64, threads=64, tm=8, tn=8, splits=4),
    "64x64.t64.split4.bk16": variant(bm=64, bn=64, threads=64, tm=8, tn=8, splits=4, bk=16),
    "32x128.t64.split8": variant(bm=32, bn=128, threads=64, tm=8, tn=8, splits=8),
    "32x128.t64.split16.bk16": variant(bm=32, bn=128, threads=64, tm=8, tn=8, splits=16, bk=16),
    "32x64.t32.split8": variant(bm=32, bn=64, threads=32, tm=8, tn=8, splits=8),
    "32x128.t64.split8.bk32.s4": variant(bm=32, bn=128, threads=64, tm=8, tn=8, splits=8, bk=32, stages=4),
    "32x256.t128.split8.bk16": variant(bm=32, bn=256, threads=128, tm=8, tn=8, splits=8, bk=16),
    # tensor cores (16-bit products): the atom forced, and wgmma's block tiles and rings
    "simt": variant(tile_tensorize="atom=none"),
    "mma": variant(tile_tensorize="atom=mma"),
    "wgmma.128x128.s4": variant(bm=128, bn=128, threads=256, stages=4, tile_tensorize="atom=wgmma"),
    "wgmma.128x256": variant(bm=128, bn=256, threads=256, tile_tensorize="atom=wgmma"),
    "wgmma.64x256": variant(bm=64, bn=256, threads=128, tile_tensorize="atom=wgmma"),
    "wgmma.128x64": variant(bm=128, bn=64, threads=256, tile_tensorize="atom=wgmma"),
    # a wgmma group left in flight across trips (the ring two deeper than the prefetch) against draining each trip
    "wgmma.s3p1": variant(stages=3, tile_tensorize="atom=wgmma", tile_pipeline="depth=1"),
    "wgmma.s4p2": variant(stages=4, tile_tensorize="atom=wgmma", tile_pipeline="depth=2"),
    "wgmma.s4p3": variant(stages=4, tile_tensorize="atom=wgmma", tile_pipeline="depth=3"),
    "wgmma.s5p3": variant(stages=5, tile_tensorize="atom=wgmma", tile_pipeline="depth=3"),
    # chunks of 32 (64-byte rows): deeper rings in the same shared memory, two 128 x 128 blocks an SM
    **{
        f"wgmma.bk32.s{s}p{p}": variant(bk=32, stages=s, tile_tensorize="atom=wgmma", tile_pipeline=f"depth={p}")
        for s, p in ((4, 2), (5, 3), (6, 4), (6, 5))
    },
    "wgmma.128x256.s3p1": variant(
        bm=128, bn=256, threads=256, stages=3, tile_tensorize="atom=wgmma", tile_pipeline="depth=1"
    ),
    "wgmma.128x256.s4p2": variant(
        bm=128, bn=256, threads=256, stages=4, tile_tensorize="atom=wgmma", tile_pipeline="depth=2"
    ),
    "wgmma.64x256.s4p2": variant(
        bm=64, bn=256, threads=128, stages=4, tile_tensorize="atom=wgmma", tile_pipeline="depth=2"
    ),
    # a producer warp issuing the copies (tile-warp-specialize) against the block's threads issuing them, and
    # rings and tiles under the producer
    "ws-off": variant(tile_warp_specialize="producer=off"),
    **{f"ws.s{s}": variant(stages=s) for s in (2, 3, 4, 5, 6)},
    "ws.128x128.s4": variant(bm=128, bn=128, threads=256, stages=4, tile_tensorize="atom=wgmma"),
    "ws.128x128.s6": variant(bm=128, bn=128, threads=256, stages=6, tile_tensorize="atom=wgmma"),
    "ws.128x256.s3": variant(bm=128, bn=256, threads=256, stages=3, tile_tensorize="atom=wgmma"),
    "ws.128x256.s4": variant(bm=128, bn=256, threads=256, stages=4, tile_tensorize="atom=wgmma"),
    "ws.64x256.s4": variant(bm=64, bn=256, threads=128, stages=4, tile_tensorize="atom=wgmma"),
    "ws.64x128.s6": variant(bm=64, bn=128, threads=128, stages=6, tile_tensorize="atom=wgmma"),
    "ws.128x64.s6": variant(bm=128, bn=64, threads=256, stages=6, tile_tensorize="atom=wgmma"),
    # tiles whose count is near a whole number of waves (L1: 128 tiles of 64 x 160 or 128 x 80; L8: 128 of 64 x 224
    # or 128 x 112, 256 of 64 x 112), rings of 4, not split
    **{
        f"wgmma.{bm}x{bn}.s4": variant(bm=bm, bn=bn, threads=2 * bm, stages=4, splits=1, tile_tensorize="atom=wgmma")
        for bm, bn in ((64, 160), (128, 80), (64, 224), (128, 112), (64, 112), (128, 64), (64, 128))
    },
    # deeper rings for the one-wave tiles (L1 64 x 160, L8 64 x 224: their warps wait on the producer's copies),
    # and the producer warp on narrower tiles (L3 128 x 128, L4 64 x 64 split 4)
    **{
        f"wave.{bm}x{bn}.s{st}": variant(bm=bm, bn=bn, threads=2 * bm, stages=st, splits=1, tile_tensorize="atom=wgmma")
        for bm, bn in ((64, 160), (64, 224))
        for st in (5, 6)
    },
    **{f"ws-on.s{st}": variant(stages=st, tile_warp_specialize="producer=on") for st in (3, 4)},
    # the producer (a warpgroup handing its registers to the consumers since 627c5b4) on tiles it was measured
    # slower on as a single warp
    **{
        f"wson.{bm}x{bn}.s{st}": variant(
            bm=bm, bn=bn, threads=2 * bm, stages=st, tile_tensorize="atom=wgmma", tile_warp_specialize="producer=on"
        )
        for bm, bn, st in ((128, 128, 4), (128, 128, 6), (64, 256, 4), (128, 64, 6), (64, 128, 6))
    },
    # gated products (GATED): the K chunk of a single product (64 a trip, not 32), the producer warpgroup, rings
    **{
        f"gated.bk{bk}{'.ws' if ws else ''}.s{st}": variant(
            bk=bk, stages=st, tile_warp_specialize="producer=on" if ws else "producer=auto"
        )
        for bk in (32, 64)
        for ws in (False, True)
        for st in (3, 4)
    },
    "gated.128x64.bk64.s4": variant(bm=128, bn=64, threads=256, bk=64, stages=4, tile_tensorize="atom=wgmma"),
    # mma.sync over many warps against one wgmma warpgroup (irforge tune's L4 winner: 16 warps of 16 x 16 atoms
    # over the default 64 x 64 split-4 tile, a ring of 2, a producer warp, block rows rastered by 2)
    "wgmma.64x64.t128": variant(bm=64, bn=64, threads=128, tile_tensorize="atom=wgmma"),  # before eb2fdf9
    "mma.t512.s2": variant(
        threads=512, stages=2, tile_tensorize="atom=mma", tile_warp_specialize="producer=on", tile_rasterize="rows=2"
    ),
    **{
        f"mma.{bm}x{bn}.t{t}.s{st}": variant(
            bm=bm, bn=bn, threads=t, stages=st, splits=1, tile_tensorize="atom=mma", tile_warp_specialize="producer=on"
        )
        for bm, bn, t, st in (
            (64, 160, 512, 4),
            (64, 224, 512, 4),
            (128, 128, 512, 3),
            (128, 160, 512, 3),
            (128, 224, 512, 3),
            (64, 128, 256, 4),
        )
    },
}


def loop_program(m: int, n: int, k: int, transposed: bool, dtype: str = "f32", residual: bool = False) -> str:
    """y = x @ w (w [k, n], or [n, k] when `transposed`: nn.Linear's) in `dtype`, accumulated in f32, plus r
    [m, n] with `residual` (f32 only)."""
    w_type = f"{dtype}[{n},{k}]" if transposed else f"{dtype}[{k},{n}]"
    w_sub = "%a1, %r" if transposed else "%r, %a1"
    half = dtype != "f32"
    widen = lambda v: f"\n          %{v}32 = scalar.cast %{v} : {dtype} -> f32" if half else ""
    a, b, out = ("%a32", "%b32", "%o") if half else ("%a", "%b", "%s")
    narrow = f"\n        %o = scalar.cast %s : f32 -> {dtype}" if half else ""
    res_arg = f", %res: {dtype}[{m},{n}]" if residual else ""
    if residual:
        narrow, out = "\n        %rv = loop.load %res[%a0, %a1]\n        %o = scalar.add %s, %rv : f32", "%o"
    return f"""func.func @forward(%x: {dtype}[{m},{k}], %w: {w_type}{res_arg}) -> {dtype}[{m},{n}] {{
  %y = loop.buffer {dtype}[{m},{n}]
  loop.kernel @k_matmul {{
    loop.for %a0 in 0..{m} {{
      loop.for %a1 in 0..{n} {{
        %s = loop.reduce %r in 0..{k} add(0.0) -> f32 {{
          %a = loop.load %x[%a0, %r]{widen("a")}
          %b = loop.load %w[{w_sub}]{widen("b")}
          %p = scalar.mul {a}, {b} : f32
          loop.yield %p
        }}{narrow}
        loop.store %y[%a0, %a1] = {out}
      }}
    }}
  }}
  func.return %y
}}
"""


def gated_program(m: int, n: int, k: int, dtype: str) -> str:
    """silu(x @ wgᵀ) * (x @ wuᵀ) in `dtype` (16-bit), both products accumulated in f32 in one reduction."""
    args = f"%x: {dtype}[{m},{k}], %wg: {dtype}[{n},{k}], %wu: {dtype}[{n},{k}]"
    return f"""func.func @forward({args}) -> {dtype}[{m},{n}] {{
  %y = loop.buffer {dtype}[{m},{n}]
  loop.kernel @k_gate_up {{
    loop.for %a0 in 0..{m} {{
      loop.for %a1 in 0..{n} {{
        %g, %u = loop.reduce %r in 0..{k} add(0.0), add(0.0) -> f32, f32 {{
          %a = loop.load %x[%a0, %r]
          %a32 = scalar.cast %a : {dtype} -> f32
          %b = loop.load %wg[%a1, %r]
          %b32 = scalar.cast %b : {dtype} -> f32
          %pg = scalar.mul %a32, %b32 : f32
          %c = loop.load %wu[%a1, %r]
          %c32 = scalar.cast %c : {dtype} -> f32
          %pu = scalar.mul %a32, %c32 : f32
          loop.yield %pg, %pu
        }}
        %sg = scalar.sigmoid %g : f32
        %act = scalar.mul %g, %sg : f32
        %o = scalar.mul %act, %u : f32
        %oc = scalar.cast %o : f32 -> {dtype}
        loop.store %y[%a0, %a1] = %oc
      }}
    }}
  }}
  func.return %y
}}
"""


def prepare(out: Path, shapes, variants, dtypes=("f32",), jobs: int = 1) -> None:
    out.mkdir(parents=True, exist_ok=True)
    os.environ["IRFORGE_CACHE_DIR"] = str(out / "cache")
    todo = [(out, s, d, v) for s in _matching(shapes) for d in dtypes for v in variants]
    if jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(jobs) as pool:
            for line in pool.map(_prepare_one, todo):
                print(line, flush=True)
    else:
        for t in todo:
            print(_prepare_one(t), flush=True)


def _pipeline(shape: str, v: str) -> str:
    if v == "main":
        return variant(**MAIN[shape]) if shape in MAIN else VARIANTS["default"]
    return VARIANTS[v]


def _prepare_one(job) -> str:
    from irforge.parser import parse_module
    from irforge.pass_manager import run_pipeline
    from irforge.printer import print_module
    from irforge.runtime.nvrtc import compile_cuda

    out, s, dtype, v = job
    os.environ["IRFORGE_CACHE_DIR"] = str(out / "cache")
    case = f"{s}.{dtype}"
    t0 = time.time()
    if s in GATED:
        module = parse_module(gated_program(*GATED[s], dtype))
    else:
        m, n, k, tr, res = SHAPES[s]
        module = parse_module(loop_program(m, n, k, tr, dtype, res))
    try:
        run_pipeline(module, _pipeline(s, v) + ",tile-to-kernel,kernel-to-cuda")
    except Exception as e:  # a refused option point is a row, not the end of the sweep
        return f"{case} {v}: refused: {str(e).splitlines()[0]}"
    logs = []
    for op in module.body.ops:
        if op.name == "cuda.kernel":
            a = op.attributes
            compile_cuda(a["source"], a["sym_name"], arch="sm_90a")
            log = compile_cuda(
                a["source"], a["sym_name"], arch="sm_90a", options=["--ptxas-options=-v"], use_cache=False
            ).log
            usage = [x for x in log.split("\n") if "registers" in x or "spill" in x]
            logs.append(f"{a['sym_name']}: {' '.join(' '.join(usage).split())}")
    (out / f"{case}__{v}.ir").write_text(print_module(module))
    return f"{case} {v}: {time.time() - t0:.1f}s {'; '.join(logs)}"


def _matching(patterns) -> list[str]:
    return [s for s in (*SHAPES, *GATED) if any(fnmatch.fnmatchcase(s, p) for p in patterns)]


def run(src: Path, out_json: str | None, only: str = "") -> None:
    import torch

    from irforge.parser import parse_module
    from irforge.runtime import Executor

    os.environ.setdefault("IRFORGE_CACHE_DIR", str(src / "cache"))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rows = []
    for path in sorted(src.glob(f"{only or '*'}.ir")):
        case, v = path.stem.split("__")
        shape, dtype = case.rsplit(".", 1)
        module = parse_module(path.read_text(), str(path))
        tdtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[dtype]
        if shape in GATED:
            m, n, k = GATED[shape]
            x = torch.randn(m, k, device="cuda", dtype=tdtype)
            wg, wu = (torch.randn(n, k, device="cuda", dtype=tdtype) / k**0.5 for _ in range(2))
            inputs, flops = (x, wg, wu), 4 * m * n * k
            eager = lambda: torch.nn.functional.silu(x @ wg.t()) * (x @ wu.t())
        else:
            m, n, k, tr, res = SHAPES[shape]
            x = torch.randn(m, k, device="cuda", dtype=tdtype)
            w = torch.randn((n, k) if tr else (k, n), device="cuda", dtype=tdtype)
            inputs = (x, w, torch.randn(m, n, device="cuda", dtype=tdtype)) if res else (x, w)
            eager = (lambda: x @ (w.t() if tr else w) + inputs[2]) if res else (lambda: x @ (w.t() if tr else w))
            flops = 2 * m * n * k
        ref = eager()
        try:
            exe = Executor(module)
            (y,) = exe(*inputs)
            torch.cuda.synchronize()
        except Exception as e:  # a failing variant is a row, not the end of the sweep
            print(f"{case} {v}: ERROR {str(e).splitlines()[0]}")
            rows.append({"case": case, "variant": v, "error": str(e).splitlines()[0]})
            continue
        err = float((y.float() - ref.float()).norm() / ref.float().norm())
        if not err < (1e-4 if dtype == "f32" else 1e-2):
            print(f"{case} {v}: WRONG (relative error {err:.3g})")
            rows.append({"case": case, "variant": v, "error": err})
            continue
        fns = {"irforge": lambda: exe(*inputs), "cublas": eager}
        times = {name: [] for name in fns}
        for fn in fns.values():
            for _ in range(3):
                fn()
        reps = 30
        for _ in range(reps):
            for name, fn in fns.items():
                flush.zero_()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                times[name].append(a.elapsed_time(b) * 1e3)
        med = {name: sorted(t)[len(t) // 2] for name, t in times.items()}
        row = {"case": case, "variant": v, "us": med["irforge"], "cublas_us": med["cublas"], "error": err}
        row["tflops"] = flops / med["irforge"] / 1e6
        row["vs_cublas"] = med["cublas"] / med["irforge"]
        row["gbps"] = sum(t.numel() for t in (*inputs, y)) * x.element_size() / med["irforge"] / 1e3
        rows.append(row)
        print(f"{case:18s} {v:18s} {med['irforge']:9.1f} us {row['tflops']:7.2f} TFLOP/s {row['gbps']:7.0f} GB/s "
              f"cuBLAS {med['cublas']:8.1f} us  {row['vs_cublas']:.2f}x")  # fmt: skip
    if out_json:
        env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
        Path(out_json).write_text(json.dumps({"environment": env, "rows": rows}, indent=1))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["prepare", "run"])
    p.add_argument("dir", type=Path)
    p.add_argument("--shapes", default=",".join(SHAPES), help="names or globs (L*), comma-separated")
    p.add_argument("--dtypes", default="f32", help="element types of the products: f32, bf16, f16")
    p.add_argument("--variants", default="all", help="names, comma-separated (main: see MAIN; all: every one)")
    p.add_argument("-o", dest="out")
    p.add_argument("--only", default="", help="run the programs whose file names match this glob (case__variant)")
    p.add_argument("--jobs", type=int, default=1, help="programs prepared in parallel")
    a = p.parse_args(argv)
    if a.mode == "prepare":
        prepare(
            a.dir,
            a.shapes.split(","),
            ["main", *VARIANTS] if a.variants == "all" else a.variants.split(","),
            a.dtypes.split(","),
            a.jobs,
        )
    else:
        run(a.dir, a.out, a.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
