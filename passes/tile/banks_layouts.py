"""Choosing a stage's shared-memory layout by the bank model (`banks`): candidates, their checks, the remark."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from irforge.dialects import tile as T
from irforge.dialects.kernel import warpgroup as WG
from irforge.dialects.kernel.types import TMA_SWIZZLE_SPANS, tma_swizzle
from irforge.dialects.tile.workspace import workspace_bytes
from irforge.passes.tile.banks import Cost, Weigher
from irforge.passes.tile_to_kernel import memory

from irforge.target import target

_DEFAULTS = {"pad": 0, "swizzle": (), "copy": "sync"}


@contextmanager
def trying(stage: T.StageOp, layout: dict):
    """The stage with the attributes of `layout` (any of pad, swizzle, copy) for the duration: what the model and
    the checks then read."""
    saved = {k: stage.attributes.get(k) for k in layout}
    for k, v in layout.items():
        _set(stage, k, v)
    try:
        yield stage
    finally:
        for k, v in saved.items():
            _set(stage, k, v)


def _set(stage: T.StageOp, key: str, value) -> None:
    if value is None or value == _DEFAULTS[key]:
        stage.attributes.pop(key, None)
    else:
        stage.attributes[key] = value


# ---- choosing a stage's layout ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    """A layout considered for a stage (the attributes it sets), and what the model says of it: its cost, or why
    it is out."""

    layout: dict
    cost: Cost | None
    why_not: str | None

    def name(self) -> str:
        a = self.layout
        parts = [f"pad {a['pad']}" if a.get("pad") else "", f"swizzle{tuple(a['swizzle'])}" if a.get("swizzle") else ""]
        return " ".join(p for p in parts if p) or "dense"

    def summary(self) -> str:
        if self.why_not:
            return f"{self.name()}: {self.why_not}"
        return f"{self.name()}: {self.cost.per_request:.2f}/request, {self.cost.wavefronts:g}"


def tma_layout(stage: T.StageOp) -> tuple | None:
    """The swizzle the copy engine can write the stage's box with (its rows of 32, 64 or 128 bytes), None when its
    rows have another length."""
    row = stage.box[-1] * stage.result.type.dtype.bytes
    return tma_swizzle(row, stage.result.type.dtype) if row in TMA_SWIZZLE_SPANS else None


def descriptor_layout(stage: T.StageOp) -> dict | None:
    """The layout wgmma's descriptors read a stage in, as the copy engine writes it: rows of 32, 64 or 128 bytes
    swizzled over their span (`tma_layout`), or longer rows of whole 128-byte spans cut into blocks of one span
    (`columns`), each swizzled over it; None for other rows."""
    dtype = stage.result.type.dtype
    blocks = WG.row_blocks(stage.box[-1] * dtype.bytes)
    if blocks is None or stage.attributes.get("pad"):
        return None
    columns = stage.box[-1] // blocks
    layout = {"swizzle": tma_swizzle(columns * dtype.bytes, dtype)}
    return layout if blocks == 1 else {**layout, "columns": columns}


def smem_bytes(kernel: T.KernelOp) -> int:
    """Shared memory the kernel's stages take (every slot of their rings, rows padded), and its combines (among
    warps, through clusters)."""
    return workspace_bytes(kernel) + sum(
        memory.slot_type(st).nbytes * st.ring for st in kernel.walk() if isinstance(st, T.StageOp)
    )


def why_not_layout(stage: T.StageOp) -> str | None:
    """Why `stage`'s layout cannot be materialized (None when it can): a swizzle that would move elements past the
    copy, a copy by the tensor memory accelerator it does not allow, the kernel's stages over the shared memory.
    Vectors a layout narrows are `narrows`'s business."""
    sw = stage.attributes.get("swizzle")
    if sw:
        b, m, _ = sw
        numel = memory.slot_type(stage).numel
        if numel % (1 << (b + m)):
            return f"has {numel} elements, which blocks of {1 << (b + m)} (what the swizzle permutes) do not tile"
    if stage.copy == "tma":
        why = memory.why_not_tma(stage)
        if why:
            return why
    kernel = T.kernel_of(stage)
    need, limit = smem_bytes(kernel), target().smem_per_block
    if need > limit:
        return f"would take the kernel's stages to {need} bytes of shared memory (the limit is {limit})"
    return None


def narrows(before: Cost, after: Cost) -> str | None:
    """Which access a layout moves in narrower vectors than `before` (None when none)."""
    for (what, a), (_, b) in zip(before.widths, after.widths):
        if b < a:
            return f"narrows {what} from {a}- to {b}-byte vectors"
    return None


def evaluate(stage: T.StageOp, layout: dict, before: Cost | None = None, weigher: Weigher | None = None) -> Candidate:
    """The stage under `layout`: its cost, or why it cannot take it (also: it narrows a vector of `before`).
    `weigher`: the stage's, to share between the layouts weighed for one decision."""
    with trying(stage, layout):
        why = why_not_layout(stage)
        cost = None if why else (weigher or Weigher(stage)).cost()
    if why is None and before is not None:
        why = narrows(before, cost)
    return Candidate(dict(layout), cost, why)


def refusal(stages: list[T.StageOp], layout: dict, option: str) -> tuple[T.StageOp, str] | None:
    """(the first of `stages` that cannot take `layout`, why), None when all can: a pass's `check` of a forced
    `option`."""
    for st in stages:
        w = Weigher(st)
        c = evaluate(st, layout, w.cost(), w)
        if c.why_not:
            return st, f"{option}: %{st.result.name_hint} {c.why_not}"
    return None


def choose(stage: T.StageOp, layouts: list[dict]) -> tuple[Candidate, Candidate, list[Candidate]]:
    """(the stage's layout now, the best of `layouts`, every candidate): the fewest wavefronts per fill among the
    layouts that keep every vector at least as wide as now; the earlier in `layouts` on a tie. The best is the
    current layout unless another has strictly fewer wavefronts; none is tried when the current one is
    conflict-free (every layout keeping the vectors issues the same instructions)."""
    w = Weigher(stage)
    current = Candidate({k: stage.attributes.get(k, _DEFAULTS[k]) for k in ("pad", "swizzle")}, w.cost(), None)
    if current.cost.wavefronts <= current.cost.ideal:
        return current, current, []
    out = [evaluate(stage, layout, current.cost, w) for layout in layouts]
    fine = [c for c in out if c.why_not is None]
    best = min(fine, key=lambda c: c.cost.wavefronts, default=current)
    return current, best if best.cost.wavefronts < current.cost.wavefronts else current, out


def proof(stage: T.StageOp, current: Candidate, best: Candidate, candidates: list[Candidate]) -> str:
    """The remark a pass makes of its choice: the stage, the layout taken, and each candidate's wavefronts per
    request and per fill (or why it was out)."""
    head = f"%{stage.result.name_hint or 'stage'} {list(stage.box)}: "
    if not candidates and current.cost.wavefronts <= current.cost.ideal:
        return head + f"keeps {current.name()}: conflict-free ({current.cost})"
    if not candidates:
        return head + f"keeps {current.name()} ({current.cost}): no other layout applies"
    if best is current:
        head += f"keeps {current.name()} ({current.cost})"
    else:
        head += f"{best.name()} ({best.cost}) instead of {current.name()} ({current.cost.per_request:.2f}/request)"
    return head + "; candidates: " + "; ".join(c.summary() for c in candidates)
