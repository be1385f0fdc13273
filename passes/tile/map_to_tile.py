from __future__ import annotations

from irforge.dialects import loop as L
from irforge.dialects import tile as T

from irforge.builtin import FuncOp
from irforge.ir import Operation
from irforge.pass_manager import Pass


class MapToTile(Pass):
    """Map each loop kernel onto the GPU: one thread per output point.

    Every outermost free loop of a kernel is a *band*: it and the free loops perfectly nested in it (cheap pure ops
    between their headers sink into the innermost body) become one multi-dimensional `tile.for` distributed over
    `blockIdx.x`, and the kernel is launched with one block of one thread per point of its largest band. Everything
    inside a band point (reductions, inner loops) runs in that thread; code outside the bands runs in every thread
    (stores once). Buffers and params become `tile.buffer` and `tile.param`. The schedule passes (`tile-blockify`,
    `tile-cooperative-reduce`, `tile-vectorize`, `tile-stage-inputs`) then refine this correct, slow start.
    """

    name = "map-to-tile"
    input_level = "loop"
    output_level = "tile"

    def run(self, op: Operation) -> None:
        for func in [o for o in op.walk() if isinstance(o, FuncOp)]:
            _map_function(func)


def _map_function(func: FuncOp) -> None:
    for op in list(func.body.ops):
        if isinstance(op, L.ParamOp):
            new = T.ParamOp.build(op.attributes["sym"].name, op.result.type, op.result.name_hint, op.loc)
        elif isinstance(op, L.BufferOp):
            new = T.BufferOp.build(op.result.type, op.result.name_hint, op.loc)
        elif isinstance(op, L.KernelOp):
            new = _map_kernel(op)
        elif op.dialect == "loop":
            raise op.error("cannot be mapped to the tile level")
        else:
            continue
        func.body.insert_before(op, new)
        for old, r in zip(op.results, new.results):
            old.replace_all_uses_with(r)
        op.erase()


def _map_kernel(kernel: L.KernelOp) -> T.KernelOp:
    attrs = {k: v for k, v in kernel.attributes.items() if k != "sym_name"}
    out = T.KernelOp.build(kernel.sym_name, loc=kernel.loc, attributes=attrs)
    vm: dict = {}
    for op in kernel.body.ops:
        if isinstance(op, L.ForOp):
            out.body.append(_band(op, vm))
        else:
            out.body.append(_convert(op, vm))
    T.fit_grid(out)
    return out


def _band(loop: L.ForOp, vm: dict) -> T.ForOp:
    """The perfect nest of free loops starting at `loop` as one tile.for over blockIdx.x."""
    nest, sunk = [loop], []
    while True:
        body = nest[-1].body.ops
        inner = [o for o in body if isinstance(o, L.ForOp)]
        rest = [o for o in body if not isinstance(o, L.ForOp)]
        if len(inner) != 1 or not all(_sinkable(o) for o in rest):
            break
        at = body.index(inner[0])
        sunk.append((rest[:at], rest[at:]))
        nest.append(inner[0])
    band = T.ForOp.build([lp.extent for lp in nest], bind=("blockIdx.x",), iv_hints=[lp.iv.name_hint for lp in nest])
    band.loc = loop.loc
    for lp, iv in zip(nest, band.ivs):
        vm[lp.iv] = iv
    before = [o for pre, _ in sunk for o in pre]
    after = [o for _, post in reversed(sunk) for o in post]
    for op in [*before, *nest[-1].body.ops, *after]:
        band.body.append(_convert(op, vm))
    return band


def _sinkable(op: Operation) -> bool:
    """Ops that may move into an inner loop's body: pure computations without regions (recomputed per point)."""
    return op.has_trait("pure") and not op.regions


_SAME_ATTRS = {
    L.LoadOp: T.LoadOp,
    L.StoreOp: T.StoreOp,
    L.IndexOp: T.IndexOp,
    L.YieldOp: T.YieldOp,
}


def _convert(op: Operation, vm: dict) -> Operation:
    """`op` at the tile level (loop ops become their tile counterparts; others are cloned), operands remapped."""
    if isinstance(op, L.ForOp):
        new = T.ForOp.build([op.extent], iv_hints=[op.iv.name_hint])
        new.loc = op.loc
        vm[op.iv] = new.ivs[0]
        for inner in op.body.ops:
            new.body.append(_convert(inner, vm))
        return new
    if isinstance(op, L.ReduceOp):
        a = op.attributes
        new = T.ReduceOp.build(
            a["extent"],
            a["monoids"],
            a["init"],
            [r.type for r in op.results],
            iv_hint=op.iv.name_hint,
            result_hints=[r.name_hint for r in op.results],
            loc=op.loc,
        )
        extra = {k: v for k, v in a.items() if k not in ("extent", "monoids", "init")}
        new.attributes.update(extra)
        vm[op.iv] = new.iv
        for inner in op.body.ops:
            new.body.append(_convert(inner, vm))
    elif type(op) in _SAME_ATTRS:
        cls = _SAME_ATTRS[type(op)]
        new = cls(
            [vm.get(v, v) for v in op.operands],
            [r.type for r in op.results],
            dict(op.attributes),
            loc=op.loc,
            result_hints=[r.name_hint for r in op.results],
        )
    elif op.dialect == "loop" or op.regions:
        raise op.error("cannot be mapped to the tile level")
    else:
        return op.clone(vm)
    for old, r in zip(op.results, new.results):
        vm[old] = r
    return new
