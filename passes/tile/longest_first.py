from __future__ import annotations

from irforge.dialects import tile as T
from irforge.dialects.loop.indexing import ValueDim
from irforge.dialects.tile.algebra import identity_mask, kept_growth
from irforge.passes.tile.rewrites import substitute

from irforge import index_expr as ix
from irforge.ir import Operation
from irforge.pass_manager import Choices, Pass, option


class TileLongestFirst(Pass):
    """Deal a band's blocks longest first where a mask gives the blocks along one dimension more trips than others.

    A masked reduction (its element a `select` between a value and the monoid's identity) whose condition compares
    indices of loops inside the band with an affine function of one block dimension keeps more of its elements
    at one end of that dimension: causal attention's query tiles, the last of which reach the most keys. The
    trips it masks whole are skipped (lower-to-kernel), so the blocks' costs differ by up to the reduction's
    trips, and in row order the last blocks dealt (the last head's tiles) include the longest, which run alone
    at the end. The pass makes that dimension the band's first and walks it from its long end (`d` becomes
    `E - 1 - d` where the kept elements grow with `d`), so the GPU deals the blocks longest first and the short
    ones fill in behind (the longest-processing-time rule; bench/results/longest_first-h100-2026-11-28: causal
    prefill at head 128, 111.6 -> 93.8 us). `order`: `auto` (as above), `off`. The pass takes a band over one
    block axis with no vector, split or raster, in a kernel that combines nothing across blocks; it leaves a
    band already in that order alone (idempotent), and says what it did or why not (`-v`). Which block computes
    which tile changes; no value does.
    """

    name = "tile-longest-first"
    input_level = "tile"
    anchor = "kernel"
    order: str = option(
        "auto", domain=Choices(("auto", "off")), help="deal blocks longest first where a mask decides (off: row order)"
    )

    def run(self, op: Operation) -> None:
        if not isinstance(op, T.KernelOp) or self.order == "off":
            return
        if any(isinstance(c, T.CombineOp) and set(c.over) & set(T.BLOCK_AXES) for c in op.walk()):
            self.remark(op, "keeps its block order: it combines across blocks")
            return
        for band in [lp for lp in op.walk() if isinstance(lp, T.ForOp) and set(lp.bind) & set(T.BLOCK_AXES)]:
            if len(band.bind) != 1 or band.vector > 1 or {"split", "warps", "raster"} & set(band.attributes):
                self.remark(band, "keeps its block order: not one block axis without vector, split or raster")
                continue
            slopes = work_slopes(band)
            if len(slopes) != 1:
                why = "no mask bounds its blocks' trips" if not slopes else "masks disagree on the longest blocks"
                self.remark(band, f"keeps its block order: {why}")
                continue
            ((d, grows),) = slopes
            name = band.ivs[d].name_hint or str(d)
            if d == 0 and grows < 0:
                self.remark(band, f"keeps its block order: it deals %{name} from its longest blocks already")
                continue
            new = reorder(band, d, grows > 0)
            end = "last" if grows > 0 else "first"
            self.remark(new, f"deals %{name} first, from its {end} blocks, which a mask gives the most trips")


def work_slopes(band: T.ForOp) -> set[tuple[int, int]]:
    """{(dimension of the band, +1 or -1)}: for each masked reduction inside the band whose kept elements grow
    with one block dimension (and with indices of loops inside the band), that dimension and the growth's sign."""
    out = set()
    for r in band.walk():
        if not isinstance(r, T.ReduceOp):
            continue
        at = 0
        for monoid, _, results in r.carriers:
            mask = identity_mask(r.yielded[at], monoid.name)
            at += len(results)
            growth = None if mask is None else kept_growth(*mask)
            if not growth:
                continue
            dims = {d: growth[iv] for d, iv in enumerate(band.ivs) if growth.get(iv) and band.extents[d] > 1}
            inside = any(
                k and iv is not None and iv not in band.ivs and band.is_ancestor_of(iv.block.parent_op)
                for iv, k in growth.items()
            )
            if len(dims) == 1 and inside:
                ((d, k),) = dims.items()
                out.add((d, 1 if k > 0 else -1))
    return out


def reorder(band: T.ForOp, d: int, reverse: bool) -> T.ForOp:
    """Make dimension `d` the band's first, from its last index down where `reverse`; returns the new band."""
    order = [d] + [j for j in range(len(band.extents)) if j != d]
    new = T.ForOp.build(
        [band.extents[j] for j in order], bind=band.bind, iv_hints=[band.ivs[j].name_hint for j in order]
    )
    new.loc = band.loc
    for k, v in band.attributes.items():
        if k not in ("extents", "bind"):
            new.attributes[k] = v
    for op in list(band.body.ops):
        op.detach()
        new.body.append(op)
    for pos, j in enumerate(order):
        if j == d and reverse:
            substitute(new, {band.ivs[j]: ix.Const(band.extents[d] - 1) - ValueDim(new.ivs[0])}, new)
        else:
            band.ivs[j].replace_all_uses_with(new.ivs[pos])
    band.parent.insert_before(band, new)
    band.erase()
    return new
