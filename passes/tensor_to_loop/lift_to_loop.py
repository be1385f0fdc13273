from __future__ import annotations

from irforge.dialects.loop import BufferOp, KernelOp, ParamOp, kernel_name
from irforge.dialects.loop.build import Builder
from irforge.dialects.loop.indexing import ValueDim

from irforge import index_expr as ix
from irforge.builtin import FuncOp, ReturnOp
from irforge.ir import Operation
from irforge.pass_manager import Pass
from irforge.scalar_ops import MONOIDS
from irforge.types import ScalarType, f32, i64, index


class LiftToLoop(Pass):
    """Lift tensor ops to the loop level: each op becomes one trivial kernel writing a fresh buffer.

    An elementwise op, constant or iota is a nest of free loops over its result storing one scalar computation; an
    index map or gather is the same nest loading through the op's index expressions; a reduction is free loops over
    the kept dimensions around one reduce loop per reduced axis (half types accumulate in f32, as PyTorch does). A
    param becomes a `loop.param`. Kernels are named after the torch ops in their locations, buffers after the
    tensor values they hold; the fusion passes then merge the kernels.

    A scatter that updates a state of the function in place (its base is the state's value on entry, read by
    nothing after it, and its result is the state's value on exit) writes only the updated slices: the state's
    result buffer starts as its argument (docs/dialects/loop.md, "State"). Any other scatter computes every
    element: the last update written there if any, else the base's.
    """

    name = "lift-to-loop"
    input_level = "tensor"
    output_level = "loop"

    def run(self, op: Operation) -> None:
        for func in [o for o in op.walk() if isinstance(o, FuncOp)]:
            _lift_function(func)


def _lift_function(func: FuncOp) -> None:
    taken: set[str] = set()
    in_place = _in_place_scatters(func)
    _snapshot_state(func, in_place, taken)
    for op in list(func.body.ops):
        if isinstance(op, ReturnOp) or op.dialect != "tensor":
            if op.dialect not in ("func", "loop"):
                raise op.error("cannot be lifted to the loop level")
            continue
        fb = Builder.before_op(op)
        hint = op.result.name_hint
        if op.name == "tensor.param":
            new = fb.insert(ParamOp.build(op.attributes["sym"].name, op.result.type, hint, op.loc)).result
        else:
            new = fb.insert(BufferOp.build(op.result.type, hint, op.loc)).result
            fallback = _LIFT.get(op.name)
            if fallback is None:
                raise op.error("cannot be lifted to the loop level")
            what, lift = _IN_PLACE if op in in_place else fallback
            label = what(op) if callable(what) else what
            kernel = fb.insert(KernelOp.build(kernel_name(op.loc, "k_" + label, taken), op.loc))
            lift(op, Builder.at_end(kernel.body, op.loc), new)
        op.result.replace_all_uses_with(new)
        op.erase()
    _own_state_buffers(func, taken)


def _in_place_scatters(func: FuncOp) -> set:
    """Scatters that update a state in place: the base is the state's argument, which nothing reads after the
    scatter, and the result is what the function returns as that state."""
    ret = func.body.ops[-1]
    found = set()
    for _, arg, pos in func.state_pairs():
        op = getattr(ret.operands[pos], "op", None)
        if op is None or op.name != "tensor.scatter" or op.base is not arg:
            continue
        at = func.body.ops.index(op)
        if all(func.body.ops.index(u) < at for u in arg.users if u is not op):
            found.add(op)
    return found


def _snapshot_state(func: FuncOp, in_place: set, taken: set) -> None:
    """A state's argument and its new value share memory: where the value on entry is read at or after the op
    computing the new value (other than an in-place scatter, which reads only the updates), those reads go to a
    copy of it made first."""
    ops = func.body.ops
    ret = ops[-1]
    for name, arg, pos in func.state_pairs():
        writer = getattr(ret.operands[pos], "op", None)
        if writer is None or writer in in_place or writer not in ops:
            continue
        at = ops.index(writer)
        if all(ops.index(u) < at for u in arg.users if u is not ret):
            continue
        b = Builder.before_op(ops[0], func.loc)
        copy = b.insert(BufferOp.build(arg.type, f"{name}.entry", func.loc)).result
        kernel = b.insert(KernelOp.build(kernel_name(func.loc, "k_state_entry", taken), func.loc))
        subs, kb = _free_loops(Builder.at_end(kernel.body, func.loc), arg.type.shape)
        kb.store(copy, subs, kb.load(arg, subs))
        for user in [u for u in arg.users if u is not ret and not kernel.is_ancestor_of(u)]:
            for i, v in enumerate(user.operands):
                if v is arg:
                    user.set_operand(i, copy)


def _own_state_buffers(func: FuncOp, taken: set) -> None:
    """Give each state a result buffer of its own (the runtime keeps the state there): a state the function
    returns as an argument or param of another name, or as another result too, is copied into a fresh buffer."""
    ret = func.body.ops[-1]
    seen = set()
    for name, arg, pos in func.state_pairs():
        v = ret.operands[pos]
        owned = v is arg or (getattr(v, "op", None) is not None and isinstance(v.op, BufferOp))
        if owned and v not in seen:
            seen.add(v)
            continue
        b = Builder.before_op(ret, ret.loc)
        copy = b.insert(BufferOp.build(v.type, name, ret.loc)).result
        kernel = b.insert(KernelOp.build(kernel_name(ret.loc, "k_state_copy", taken), ret.loc))
        subs, kb = _free_loops(Builder.at_end(kernel.body, ret.loc), v.type.shape)
        kb.store(copy, subs, kb.load(v, subs))
        ret.set_operand(pos, copy)
        seen.add(copy)


def _free_loops(b: Builder, shape, skip=()) -> tuple[list, Builder]:
    """Free loops over `shape` (dimensions of size 1 and those in `skip` get none): the subscripts of the result,
    and the body."""
    subs = []
    for k, n in enumerate(shape):
        if k in skip or n == 1:
            subs.append(ix.Const(0))
        else:
            iv, b = b.for_(n, f"a{k}")
            subs.append(ValueDim(iv))
    return subs, b


def _through(m, subs) -> list:
    """An index map's input coordinates, for result coordinates `subs`."""
    return [r.substitute(subs) for r in m.results]


def _elementwise(op, b: Builder, out) -> None:
    subs, b = _free_loops(b, out.type.shape)
    loaded = {}  # `mul %x, %x` loads %x once
    for v in op.operands:
        if v not in loaded:
            loaded[v] = b.load(v, subs)
    args = [loaded[v] for v in op.operands]
    fn = op.attributes["op"]
    value = b.cast(args[0], out.type.dtype) if fn == "cast" else b.scalar(fn, *args)
    b.store(out, subs, value)


def _constant(op, b: Builder, out) -> None:
    subs, b = _free_loops(b, out.type.shape)
    b.store(out, subs, b.const(op.attributes["value"], out.type.dtype))


def _iota(op, b: Builder, out) -> None:
    subs, b = _free_loops(b, out.type.shape)
    coord = subs[op.attributes["dim"]]
    iv = coord.value if isinstance(coord, ValueDim) else b.index(coord)
    b.store(out, subs, b.cast(iv, out.type.dtype))


def _index_map(op, b: Builder, out) -> None:
    subs, b = _free_loops(b, out.type.shape)
    b.store(out, subs, b.load(op.input, _through(op.attributes["map"], subs)))


def _gather(op, b: Builder, out) -> None:
    subs, b = _free_loops(b, out.type.shape)
    looked_up = b.load(op.indices, _through(op.attributes["index_map"], subs))
    coords = _through(op.attributes["map"], subs)
    coords.insert(op.attributes["axis"], ValueDim(b.cast(looked_up, index)))
    b.store(out, subs, b.load(op.input, coords))


def _scatter_in_place(op, b: Builder, out) -> None:
    """Write the updates' slices only; `out` is the state's buffer, which holds the rest already."""
    subs, b = _free_loops(b, op.updates.type.shape)
    axis = op.attributes["axis"]
    coords = list(subs)
    coords[axis] = ValueDim(b.cast(b.load(op.indices, [subs[axis]]), index))
    b.store(out, coords, b.load(op.updates, subs))


def _scatter(op, b: Builder, out) -> None:
    """Each element of the result: the last update written there (a max over the update positions that land on
    it), else the base's element."""
    axis = op.attributes["axis"]
    subs, b = _free_loops(b, out.type.shape)
    here = b.cast(subs[axis].value if isinstance(subs[axis], ValueDim) else b.index(subs[axis]), i64)
    red, k, inner = b.reduce(op.indices.type.shape[0], [("max", (-1,))], [i64], "k", ["last"])
    lands = inner.scalar("eq", inner.cast(inner.load(op.indices, [ValueDim(k)]), i64), here)
    inner.yield_(inner.scalar("select", lands, inner.cast(k, i64), inner.const(-1, i64)))
    last = red.result
    written = b.scalar("ge", last, b.const(0, i64))
    coords = list(subs)
    coords[axis] = ValueDim(b.cast(b.scalar("maximum", last, b.const(0, i64)), index))
    value = b.scalar("select", written, b.load(op.updates, coords), b.load(op.base, subs))
    b.store(out, subs, value)


def _reduce(op, b: Builder, out) -> None:
    axes = op.attributes["axes"]
    src = op.input.type
    monoid = MONOIDS[op.attributes["kind"]]
    acc = accumulator(src.dtype)
    init = monoid.identity(acc)
    subs, b = _free_loops(b, src.shape, skip=axes)
    coords = list(subs)
    reductions = []
    inner = b
    for k in axes:
        red, iv, inner = inner.reduce(src.shape[k], [(monoid.name, (init,))], [acc], f"r{k}", [_CARRIER[monoid.name]])
        coords[k] = ValueDim(iv)
        reductions.append(red)
    value = inner.cast(inner.load(op.input, coords), acc)
    for red in reversed(reductions):
        Builder.at_end(red.body, op.loc).yield_(value)
        value = red.result
    b.store(out, subs, b.cast(value, out.type.dtype))


def accumulator(dtype: ScalarType) -> ScalarType:
    """The type a reduction of `dtype` accumulates in: f32 for half types (as PyTorch does)."""
    return f32 if dtype.name in ("f16", "bf16") else dtype


_CARRIER = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}  # names of reduction results

_LIFT = {
    "tensor.elementwise": (lambda op: op.attributes["op"], _elementwise),
    "tensor.constant": ("constant", _constant),
    "tensor.iota": ("iota", _iota),
    "tensor.index_map": ("index_map", _index_map),
    "tensor.gather": ("gather", _gather),
    "tensor.reduce": (lambda op: "reduce_" + op.attributes["kind"], _reduce),
    "tensor.scatter": ("scatter", _scatter),
}
_IN_PLACE = ("scatter", _scatter_in_place)
