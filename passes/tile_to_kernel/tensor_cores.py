"""lower-to-kernel's tensor-core rules: a contraction inside a loop laid out on an atom (`tile-tensorize`).

The loop's thread holds its lane's share of a warp's accumulator (`!kernel.frag<"acc", f32, [rows, cols]>`, the
warp tile `extents / warps`); the reduction chain around the contraction (its K chunks, its split over blocks)
carries that fragment, and the contraction itself becomes a loop over steps of the atom's k: each step loads the
factors' fragments (`kernel.ldmatrix` from staged slabs where their rows are whole 16-byte pieces, else
`kernel.frag_load`), applies the factors' elementwise math to them (a prologue), and issues `kernel.mma`. Where the
chain ends, the fragment becomes the thread's register tile (a reshape: an accumulator's lane elements are the
tile the loop's layout gives the thread), and the epilogue and stores proceed as on the SIMT path.

A loop laid out on a wgmma atom (warpgroups of 64 rows over the tile's N columns) runs each chunk as one group:
`kernel.wgmma_fence`, a `kernel.wgmma` per step of 16 reading both factors' slabs from shared memory through
descriptors, `kernel.wgmma_commit`, then `kernel.wgmma_wait 0` (the slab's slot is refilled after the next trip's
barrier), or `kernel.wgmma_wait 1` where the slabs' rings are two deeper than their prefetch (the group stays in flight
while the next trip's is issued; the loop waits for the last after its final trip); its accumulator is the warpgroup's
`[64, N]` fragment, whose lanes hold the same points as mma warp tiles of 16 rows. Where the slabs are not ones a
descriptor names (not copied by the tensor memory accelerator in its swizzle, or a factor with a prologue), the same
loop runs on mma.sync instead.
"""

from __future__ import annotations

import math

from irforge.dialects import tile as T
from irforge.dialects.kernel import warpgroup
from irforge.dialects.kernel.builder import Val
from irforge.dialects.kernel.types import FragType, SmemType, with_element_type
from irforge.dialects.loop.indexing import multiple_of
from irforge.dialects.scalar import CastOp, ScalarMathOp
from irforge.dialects.tile import fragments
from irforge.dialects.tile.vectors import expand

from irforge.ir import Operation, Value
from irforge.target import target
from irforge.types import TensorType

from .emit import FULL_UNROLL
from .memory import block_index, slot_type


def why_not(kernel: T.KernelOp, op: Operation) -> str | None:
    """Why a loop laid out on an atom cannot be materialized on it (None when it can, or for other ops)."""
    if not isinstance(op, T.ForOp) or "atom" not in op.attributes:
        return None
    atom = fragments.Atom.parse(op.attributes["atom"])
    if atom is None:
        return f"is laid out on '{op.attributes['atom']}', which is no atom ({fragments.ATOM_FORMS})"
    if atom.family == "wgmma" and op.attributes.get("warps", (0, 0))[1] != 1:
        return f"is laid out on {atom}, whose warpgroups span all the tile's columns (warps [4k, 1])"
    if not target().has("ldmatrix"):
        return f"is laid out on {atom}, which {target().arch} does not have (mma.sync needs sm_80)"
    # the block's threads along x, one work item each (a warp's ghost rows on the atoms' top half: whole warps)
    lanes = -(-op.work_items // target().warp_size) * target().warp_size
    sliced = kernel.axis_size("threadIdx.y") if _sliced_within(op) else 1
    if op.bind != ("threadIdx.x",) or kernel.attributes["block"] != (lanes, sliced, 1):
        return (
            f"is laid out on {atom}, so its {op.work_items} work items must be the block's threads along x, one each "
            f"(the block is {list(kernel.attributes['block'])})"
        )
    ops = fragments.any_operands(op, *op.ivs, atom.k)
    if isinstance(ops, str):
        return f"is laid out on {atom}, but its contraction {ops}"
    if isinstance(ops, fragments.AttentionOperands) and op.attributes["warps"][1] != 1:
        return f"is laid out on {atom}, but attention runs with whole rows a warp (warps [k, 1])"
    if isinstance(ops, fragments.AttentionOperands) and not isinstance(ops.contraction.reduce.parent_op, T.ReduceOp):
        return (
            f"is laid out on {atom}, but its attention's keys are not in chunks: the atoms take a chunk's scores "
            "whole, so the online reduction over keys must hold the one over a chunk (tile-chunk-reduce)"
        )
    rows = op.extents[0] // op.attributes.get("warps", (1, 1))[0]
    if rows in fragments.TOP_ROWS and not isinstance(ops, fragments.AttentionOperands):
        return f"is laid out on {atom} in warp tiles of {rows} rows (the atoms' top halves), built for attention only"
    return None


def _sliced_within(loop: T.ForOp) -> bool:
    """Whether a reduction inside `loop` is sliced among warps along threadIdx.y (`tile-split-reduce
    across=warps`): each warp then runs the loop's whole layout on its own share of the reduction."""
    return any(isinstance(r, T.ReduceOp) and r.bind == ("threadIdx.y",) for r in loop.walk())


def _tensorized(r: T.ReduceOp) -> tuple[T.ForOp, T.ReduceOp] | None:
    """(the loop laid out on an atom, its contraction) when `r` is that contraction or, chunk by chunk
    (`lower_to_kernel._chunk`), holds it."""
    found = atom_loop(r)
    if found is None:
        return None
    loop, inner = found
    ops = fragments.operands(loop, *loop.ivs)
    return (loop, inner) if not isinstance(ops, str) and ops.contraction.reduce is inner else None


def atom_loop(r: T.ReduceOp) -> tuple[T.ForOp, T.ReduceOp] | None:
    """(the loop laid out on an atom around `r`, the innermost chunk of `r`'s chain: `lower_to_kernel._chunk`), or
    None where no such loop holds `r`."""
    from .lower_to_kernel import _chunk

    inner = r
    while (nxt := _chunk(inner)) is not None:
        inner = nxt
    loop = next((lp for lp in T.enclosing_loops(inner) if "atom" in lp.attributes), None)
    return (loop, inner) if loop is not None and loop.is_ancestor_of(r) else None


def on_wgmma(loop: T.ForOp) -> bool:
    """Whether the tensorized `loop` computes its contraction (or attention's two) with wgmma: laid out on a
    wgmma atom, on a target that has it, the factors it reads through descriptors (`fragments.descriptor_factors`)
    plain loads of stages the tensor memory accelerator copies in the layout a descriptor names."""
    if not target().has("wgmma"):
        return False
    factors = fragments.descriptor_factors(loop)
    return bool(factors) and all(_descriptor_slab(ld) for f in factors for ld in f.loads)


def _descriptor_slab(load: T.LoadOp) -> bool:
    """Whether a factor's load reads a stage the tensor memory accelerator copies in a layout a descriptor names."""
    st = load.operands[0].owner
    if not isinstance(st, T.StageOp) or st.copy != "tma" or st.attributes.get("pad", 0):
        return False
    return not isinstance(warpgroup.descriptor(slot_type(st)), str)


def read_through_descriptors(kernel: T.KernelOp, stage: T.StageOp) -> bool:
    """Whether every load of `stage` is of a factor a wgmma reads through a descriptor (`on_wgmma`)."""
    loads = set()
    for loop in (lp for lp in kernel.walk() if isinstance(lp, T.ForOp) and "atom" in lp.attributes):
        if on_wgmma(loop):
            loads |= {ld for f in fragments.descriptor_factors(loop) for ld in f.loads}
    return all(user in loads for user in stage.result.users)


def accumulator(m, r: T.ReduceOp) -> FragType | None:
    """The fragment type `r`'s carriers have when it is (or holds) a tensorized contraction, else None: a warp
    tile of mma atoms, or a warpgroup's [64, N] on wgmma."""
    found = _tensorized(r)
    if found is None:
        return None
    loop = found[0]
    tile = tuple(e // w for e, w in zip(loop.extents, loop.attributes["warps"]))
    if on_wgmma(loop):
        return FragType("acc", r.results[0].type, (64, tile[1]), "wgmma")
    return FragType("acc", r.results[0].type, tile)


def register_tile(m, r: T.ReduceOp, v: Value) -> Value:
    """A carrier of `r` as the rest of the kernel sees it: where the chain of reductions around the contraction
    ends, the accumulator fragment's lane elements as the thread's register tile."""
    from .lower_to_kernel import _chunk

    parent = r.parent_op
    if isinstance(parent, T.ReduceOp) and _chunk(parent) is r:
        return v
    loop = _tensorized(r)[0]
    return m.kb.reshape(v, TensorType(v.type.dtype, loop.vector_shape), v.name_hint)


def contracts(r: T.ReduceOp) -> bool:
    found = _tensorized(r)
    return found is not None and found[1] is r


def contract(m, r: T.ReduceOp) -> None:
    """The contraction `r` of a tensorized loop: steps of 16 along its reduction, each loading the factors'
    fragments at the warp's tile and issuing one mma per carrier into the accumulators."""
    kb = m.kb
    loop, _ = _tensorized(r)
    ops = fragments.operands(loop, *loop.ivs)
    acc_t = accumulator(m, r)
    inits = m.carry_into.pop(r, None) or [kb.const(0.0, acc_t, "acc") for _ in r.results]
    if acc_t.layout == "wgmma":
        _contract_wgmma(m, r, loop, ops, inits)
        return
    warp_tile = acc_t.shape
    # The warp's first row and column: warp w of the block takes warp tile (w / W1, w % W1).
    unit = Val(m.trip[loop])
    warp = unit // target().warp_size
    w1 = loop.attributes["warps"][1]
    origin = [kb.index((warp // w1) * warp_tile[0], "warp_row"), kb.index((warp % w1) * warp_tile[1], "warp_col")]
    steps = r.extents[0] // 16
    with kb.for_(0, steps, carries=inits, hint="ks", unroll=0 if steps <= FULL_UNROLL else None) as lp:
        for c, res in zip(lp.carries, r.results):
            c.name_hint = f"{res.name_hint or 'acc'}_frag"
        k0 = kb.index(Val(lp.iv) * 16, "k0")
        at = {loop.ivs[0]: origin[0], loop.ivs[1]: origin[1], r.iv: k0}
        frags: dict[Value, Value] = {}
        new = []
        for (a, b), acc in zip(ops.products, lp.carries):
            fa = _factor(m, a, "a", (warp_tile[0], 16), at, r.iv, frags)
            fb = _factor(m, b, "b", (16, warp_tile[1]), at, r.iv, frags)
            new.append(kb.mma(fa, fb, acc, acc.name_hint))
        lp.yield_(*new)
    for res, v in zip(r.results, lp.results):
        v.name_hint = res.name_hint
        m.env[res] = register_tile(m, r, v)


def _contract_wgmma(m, r: T.ReduceOp, loop: T.ForOp, ops: fragments.Operands, inits: list[Value]) -> None:
    """One group of wgmmas over the chunk: warpgroup g takes rows 64g .. 64g + 63 of the tile and all its columns;
    each step reads A's [64, 16] and B's [N, 16] (K-major) tiles of the staged slabs through descriptors."""
    kb = m.kb
    group = Val(m.trip[loop]) // (4 * target().warp_size)
    origin = {loop.ivs[0]: kb.index(group * 64, "wg_row"), loop.ivs[1]: kb.index(0, "wg_col")}
    steps = r.extents[0] // 16
    kb.wgmma_fence()
    with kb.for_(0, steps, carries=inits, hint="ks", unroll=0 if steps <= FULL_UNROLL else None) as lp:
        for c, res in zip(lp.carries, r.results):
            c.name_hint = f"{res.name_hint or 'acc'}_frag"
        at = origin | {r.iv: kb.index(Val(lp.iv) * 16, "k0")}
        new = []
        for (a, b), acc in zip(ops.products, lp.carries):
            sa, ia = _slab_tile(m, a.loads[0], at)
            sb, ib = _slab_tile(m, b.loads[0], at)
            new.append(kb.wgmma(sa, ia, sb, ib, acc, acc.name_hint))
        lp.yield_(*new)
    kb.wgmma_commit()
    ring_loop = _keeps_group_in_flight(ops)
    if ring_loop is None:
        kb.wgmma_wait(0)
    else:
        kb.wgmma_wait(1)
        m.wgmma_in_flight.add(ring_loop)
    for res, v in zip(r.results, lp.results):
        v.name_hint = res.name_hint
        m.env[res] = register_tile(m, r, v)


def _keeps_group_in_flight(ops: fragments.Operands) -> T.LoopOp | None:
    """The loop whose trips may leave their group of wgmmas in flight (`wgmma_wait 1`; the loop waits for the
    last one after its final trip), or None. A trip's group reads its slabs' slots until it completes; trip k
    refills the slot that trip k + prefetch - ring read, so a ring at least two deeper than the prefetch never
    overwrites the slot of the one group still in flight (trip k - 1's), and the tensor cores need not drain
    between trips."""
    stages = {ld.operands[0].owner for a, b in ops.products for ld in (a.loads[0], b.loads[0])}
    loops = {st.parent_op for st in stages if isinstance(st, T.StageOp)}
    if len(loops) != 1 or any(not isinstance(st, T.StageOp) or st.ring - st.prefetch < 2 for st in stages):
        return None
    (loop,) = loops
    return loop if isinstance(loop, T.LoopOp) else None


def _slab_tile(m, op: T.LoadOp, at: dict) -> tuple[Value, list]:
    """(shared buffer, index of the tile's first element) of a staged load where the tile's indices and the
    reduction's are `at`."""
    st = m.staged[op.operands[0]]
    index = block_index(op.operands[0].owner, _at(m, op, at))
    return st.smem, ([Val(st.slot)] if st.ring > 1 else []) + index


def _factor(m, f: fragments.Factor, role: str, shape, at: dict, k: Value, frags: dict, rows: int = 0) -> Value:
    """The fragment of a factor at the warp's tile and this step's k: its loads as fragments, its math applied to
    them elementwise (scalars defined around it broadcast); `rows`: the tile's rows where fewer than the fragment's
    (its ghost rows read the last one's)."""
    kb = m.kb
    for op in f.ops:
        if op.results[0] in frags:
            continue
        if isinstance(op, T.LoadOp):
            v = _load(m, op, role, shape, at, k, rows)
        elif isinstance(op, CastOp):
            src = frags[op.operand]
            v = kb.cast(src, with_element_type(src.type, op.result.type))
        elif isinstance(op, ScalarMathOp):
            v = kb.scalar(op.fn, *(frags.get(x) or m.get(x) for x in op.operands))
        else:  # a constant
            v = kb.const(op.attributes["value"], op.result.type)
        frags[op.results[0]] = v
    return frags[f.value]


def _load(m, op: T.LoadOp, role: str, shape, at: dict, k: Value, rows: int = 0) -> Value:
    """A factor's load as the warp's fragment: its first element where the tile's index is the warp's origin and
    the reduction's is this step's k. The fragment's tile is rows x k for A and k x columns for B; stored the other
    way round (A with k down its buffer's rows, B with k along them, as nn.Linear keeps weights) it is read
    transposed."""
    kb = m.kb
    k_dim = fragments.k_dim(op, k)
    transpose = (k_dim == -2) if role == "a" else (k_dim == -1)
    src = op.operands[0]
    frag = FragType(role, src.type.dtype, shape)
    hint = f"{src.name_hint or 'x'}_{role}".replace(".", "_")
    rows_dim = fragments.rows_dim(op, list(at))
    extra = {"rows_dim": rows_dim, "rows": rows if 0 < rows < shape[0] else 0}
    if src in m.staged:
        smem, idx = _slab_tile(m, op, at)
        if _ldmatrix_fits(smem.type, op, at):
            return kb.ldmatrix(smem, idx, frag, transpose=transpose, hint=hint, **extra)
        return kb.frag_load(smem, idx, frag, transpose=transpose, hint=hint, **extra)
    flat = 0
    for e, n in zip(_at(m, op, at), src.type.shape):
        flat = flat * n + e
    stride = math.prod(src.type.shape[rows_dim + 1 :])
    return kb.frag_load(m.ptr[src], [flat], frag, stride=stride, transpose=transpose, hint=hint, rows=extra["rows"])


def _at(m, op: T.LoadOp, at: dict) -> list:
    """A load's subscripts (kernel index expressions) where the tile's indices and the reduction's are `at`."""
    saved = {v: m.env[v] for v in at if v in m.env}
    m.env.update(at)
    exprs = [m.kexpr(expand(e)) for e in op.index_exprs()]
    m.env.update(saved)
    return exprs


def _ldmatrix_fits(t: SmemType, op: T.LoadOp, at: dict) -> bool:
    """Whether a fragment of this staged load can come in ldmatrix's 16-byte rows: rows of whole 16-byte pieces
    that a swizzle keeps together, and memory rows starting at multiples of 8 elements (the subscript along the
    buffer's last dimension is one when the tile's indices and the reduction's are)."""
    if t.dtype.bytes != 2 or (t.shape[-1] * 2) % 16 or (t.swizzle and t.swizzle[1] < 3):
        return False
    return multiple_of(expand(op.index_exprs()[-1]), 8, dict.fromkeys(at, 8))
