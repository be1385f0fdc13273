"""Does the L2 flush's dirty data cost the timed call? Eager GEMVs and a large copy timed after the harness's flush
(write 2x L2, then spin) and after a clean flush (write 2x L2, read another 2x L2 buffer, then spin).

    python flush_ab.py OUT.json     # on a GPU, torch only
"""

import json
import statistics
import sys

import torch

SPIN_CYCLES = 200_000
torch.manual_seed(0)
l2 = torch.cuda.get_device_properties(0).L2_cache_size
written = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda")
read = torch.ones(2 * l2 // 4, dtype=torch.float32, device="cuda")
sink = torch.empty((), device="cuda")


def dirty():
    written.zero_()
    torch.cuda._sleep(SPIN_CYCLES)


def clean():
    written.zero_()
    torch.sum(read, dim=0, out=sink)
    torch.cuda._sleep(SPIN_CYCLES)


def gemv(n, k):
    x = torch.randn(1, k, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(n, k, dtype=torch.bfloat16, device="cuda")
    return (lambda: torch.nn.functional.linear(x, w)), n * k * 2


cases = {name: gemv(n, k) for name, (n, k) in {"L6": (32000, 2048), "L11": (37888, 3584), "L5": (2560, 2048),
                                                 "L13": (152064, 3584)}.items()}  # fmt: skip
big = torch.randn(256 << 20, dtype=torch.bfloat16, device="cuda")
out = torch.empty_like(big)
cases["copy512MB"] = (lambda: out.copy_(big), 2 * big.numel() * 2)
res = {}
for name, (fn, nbytes) in cases.items():
    for _ in range(5):
        fn()
    events = {"dirty": [], "clean": []}
    for _ in range(60):
        for mode, flush in (("dirty", dirty), ("clean", clean)):
            flush()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            events[mode].append((start, end))
    torch.cuda.synchronize()
    row = {m: statistics.median(s.elapsed_time(e) * 1e3 for s, e in v) for m, v in events.items()}
    row.update({f"{m}_TBps": nbytes / (row[m] * 1e-6) / 1e12 for m in ("dirty", "clean")})
    res[name] = row
    print(name, {k: round(v, 2) for k, v in row.items()})
json.dump(res, open(sys.argv[1], "w"), indent=1)
