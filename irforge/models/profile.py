"""Where a compiled step's time goes: each kernel of its linked program with its launch shape (grid, block, shared
memory), the bytes of its arguments, the time those bytes take at the copy bandwidth (its floor) and, on the GPU,
the time its launches take.

    rows = kernels(gpu.link(model.steps["decode"]))       # any machine: what runs, how it is scheduled, its bytes
    times = launch_times(runner, "decode", ids, position)  # the GPU: milliseconds per launch, in launch order
    print(table(rows, bandwidth, times))

A kernel's bytes count each argument buffer once, whole: a floor for a kernel that reads its inputs and writes its
outputs once (a linear layer's weight), an overestimate for one that touches part of a buffer (the cache update
writes one position of the cache it is handed). The times come from one eager run with an event between
consecutive launches, the launches queued behind a spin so that they run back to back as in the graph replay
(`Executor.kernel_times`); the gap between launches is counted in the kernel before it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from irforge.dialects.cuda import ops as C


@dataclass
class Kernel:
    name: str
    grid: tuple
    block: tuple
    smem: int
    args: tuple[str, ...]  # the argument types, in order
    nbytes: int  # every argument buffer once
    launches: int  # in one run of the step

    @property
    def threads(self) -> int:
        g, b = self.grid, self.block
        return g[0] * g[1] * g[2] * b[0] * b[1] * b[2]


def kernels(module) -> list[Kernel]:
    """The kernels a linked cuda module's program launches, in the order of their first launch."""
    defs = {op.attributes["sym_name"]: op for op in module.body.ops if isinstance(op, C.CudaKernelOp)}
    prog = next(op for op in module.body.ops if isinstance(op, C.ProgramOp))
    found: dict[str, Kernel] = {}
    for op in prog.body.ops:
        if not isinstance(op, C.LaunchOp):
            continue
        name = op.attributes["callee"].name
        if name in found:
            found[name].launches += 1
            continue
        a = defs[name].attributes
        nbytes = sum(v.type.numel * v.type.dtype.bytes for v in set(op.args))
        found[name] = Kernel(name, a["grid"], a["block"], a["smem"], tuple(str(v.type) for v in op.args), nbytes, 1)
    return list(found.values())


def launch_times(runner, step: str, input_ids, cache_position, reps: int = 5) -> list[tuple[str, float]]:
    """(kernel, median milliseconds) per launch of one step run eagerly on `runner` (an `OnGPU`), after a warm-up
    run; the cache is written at `cache_position` as the step would."""
    import torch

    ex = runner.executors[step]
    args = [torch.as_tensor(x, dtype=torch.long, device="cuda") for x in (input_ids, cache_position)]
    ex.kernel_times(*args)
    runs = [ex.kernel_times(*args) for _ in range(reps)]
    return [(name, statistics.median(r[i][1] for r in runs)) for i, (name, _) in enumerate(runs[0])]


def by_kernel(times: list[tuple[str, float]]) -> dict[str, float]:
    """Total milliseconds per kernel over its launches."""
    total: dict[str, float] = {}
    for name, ms in times:
        total[name] = total.get(name, 0.0) + ms
    return total


def table(rows: list[Kernel], bandwidth: float | None = None, times: list[tuple[str, float]] | None = None) -> str:
    """One line per kernel: launches, launch shape, bytes, and with `bandwidth` (bytes/s) the floor of a launch;
    with `times`, the measured time of a launch and of all of them, the floor's share of it, and the kernels
    sorted by their total time (the largest first)."""
    total = by_kernel(times) if times else {}
    if times:
        rows = sorted(rows, key=lambda k: -total.get(k.name, 0.0))
    head = f"{'kernel':46} {'n':>3} {'grid':>14} {'block':>11} {'smem':>6} {'MB':>8}"
    if bandwidth:
        head += f" {'floor us':>9}"
    if times:
        head += f" {'us':>9} {'floor %':>8} {'total ms':>9} {'share':>6}"
    lines = [head]
    whole = sum(total.values())
    for k in rows:
        line = f"{k.name:46} {k.launches:3d} {_dims(k.grid):>14} {_dims(k.block):>11} {k.smem:6d} {k.nbytes / 1e6:8.3f}"
        floor_us = k.nbytes / bandwidth * 1e6 if bandwidth else None
        if floor_us is not None:
            line += f" {floor_us:9.2f}"
        if times:
            each = total.get(k.name, 0.0) / k.launches * 1e3
            pct = f"{100 * floor_us / each:7.0f}%" if floor_us is not None and each > 0 else f"{'-':>8}"
            line += f" {each:9.2f} {pct} {total.get(k.name, 0.0):9.3f} {100 * total.get(k.name, 0.0) / whole:5.1f}%"
        lines.append(line)
    if times:
        floor = sum(k.nbytes * k.launches for k in rows) / bandwidth * 1e3 if bandwidth else None
        tail = f"{len(times)} launches: {whole:.3f} ms run back to back"
        lines.append(tail + (f"; floor of the bytes {floor:.3f} ms" if floor is not None else ""))
    if bandwidth:
        lines.append(
            "(bytes: each argument whole, so a gather's table (the embedding) or the cache update's cache counts whole)"
        )
    return "\n".join(lines) + "\n"


def _dims(d: tuple) -> str:
    return "x".join(str(x) for x in d)
