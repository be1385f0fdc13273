"""Values: constants, scalar math (one op per entry of the scalar op table), casts and register tiles."""

from __future__ import annotations

from typing import ClassVar

from irforge.scalar_ops import MONOIDS, SCALAR_OPS
from irforge.types import ScalarType, TensorType

from ..types import FragType, element_type, with_element_type
from .base import KernelOp


def _value_type_ok(t) -> bool:
    return isinstance(t, (ScalarType, TensorType, FragType))


class ConstOp(KernelOp):
    """A constant: a scalar, or a register tile or fragment with every element equal to it, or a register tile
    with each element given (`kernel.const [0, 1, 64, 65] : index[2,2]`, row-major: a tile of lane offsets)."""

    name = "kernel.const"
    operand_names = ()
    result_names = ("result",)
    attribute_types = {"value": (int, float, bool, tuple)}
    num_regions = 0
    traits = frozenset({"pure"})

    def verify_op(self):
        t = self.result.type
        if not _value_type_ok(t):
            raise self.error(f"result must be a scalar, register tile or fragment, got {t}")
        v, et = self.attributes["value"], element_type(t)
        if isinstance(v, tuple):
            if not isinstance(t, TensorType) or len(v) != t.numel:
                raise self.error(f"{len(v)} values for {t}: a tile constant gives one per element")
        for x in v if isinstance(v, tuple) else (v,):
            if isinstance(x, bool) != (et.name == "bool") or (isinstance(x, float) and not et.is_float):
                raise self.error(f"value {p_attr(x)} does not fit type {et}")

    def print_custom(self, p):
        p.write("kernel.const ", p.attr(self.attributes["value"]), " : ", p.type(self.result.type))


def p_attr(v) -> str:
    from irforge.printer import format_attr

    return format_attr(v)


def elementwise_result_type(op_name: str, types) -> object:
    """The result type of scalar op `op_name` applied elementwise: scalars broadcast against tiles and fragments,
    register tiles of one rank broadcast against each other along dimensions of size 1 (an `f32[8,1]` column times
    an `f32[1,8]` row is the `f32[8,8]` outer product), fragments take only their own layout; the element type
    follows the scalar op table. Raises ValueError with a reason."""
    containers = [t for t in types if not isinstance(t, ScalarType)]
    for t in containers:
        if not isinstance(t, (TensorType, FragType)):
            raise ValueError(f"operands must be scalars, register tiles or fragments, got {t}")
    elt = SCALAR_OPS[op_name].result_type([element_type(t) for t in types])
    if not containers:
        return elt
    frags = [t for t in containers if isinstance(t, FragType)]
    if frags:
        if any(t != with_element_type(frags[0], t.dtype) for t in containers):
            raise ValueError(
                f"operand shapes differ: {containers[0]} and {next(t for t in containers if t != containers[0])}"
            )
        return with_element_type(frags[0], elt)
    return TensorType(elt, broadcast_shape([t.shape for t in containers]))


def broadcast_shape(shapes) -> tuple[int, ...]:
    """The shape register tiles of one rank broadcast to (each dimension equal, or 1). Raises ValueError."""
    out = list(shapes[0])
    for s in shapes[1:]:
        if len(s) != len(out):
            raise ValueError(f"operand shapes differ: {list(shapes[0])} and {list(s)} (tiles of one rank broadcast)")
        for d, n in enumerate(s):
            if n != out[d] and 1 not in (n, out[d]):
                raise ValueError(f"operand shapes differ: {list(shapes[0])} and {list(s)} do not broadcast")
            out[d] = max(out[d], n)
    return tuple(out)


class ScalarMathOp(KernelOp):
    """Base of the ops named after the scalar op table (`kernel.add`, `kernel.exp`, ...), applied elementwise to
    register tiles and fragments."""

    operand_names = ("*args",)
    result_names = ("result",)
    num_regions = 0
    traits = frozenset({"pure"})
    scalar_op: ClassVar[str] = ""

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        return [elementwise_result_type(cls.scalar_op, operand_types)]

    def verify_op(self):
        try:
            want = elementwise_result_type(self.scalar_op, [v.type for v in self.operands])
        except ValueError as e:
            raise self.error(str(e)) from None
        if self.result.type != want:
            raise self.error(f"result type must be {want}, got {self.result.type}")

    def print_custom(self, p):
        p.write(self.name, " ", p.values(self.operands))
        p.attr_dict(self.attributes)
        p.write(" : ", p.type(self.result.type))


def _make_scalar_op(name: str) -> type:
    o = SCALAR_OPS[name]
    cls_name = "".join(w.capitalize() for w in name.split("_")) + "Op"
    doc = f"`{name}` from the scalar op table: {o.summary}."
    return type(cls_name, (ScalarMathOp,), {"name": f"kernel.{name}", "scalar_op": name, "__doc__": doc})


# `cast` is the one table entry whose result type is not inferred: it is `kernel.cast`, below, with its own syntax.
SCALAR_MATH_OPS = tuple(_make_scalar_op(n) for n, o in SCALAR_OPS.items() if o.kind != "cast")


class CastOp(KernelOp):
    """Convert each element to another scalar type (round to nearest even into f16/bf16, truncate into integers)."""

    name = "kernel.cast"
    operand_names = ("input",)
    result_names = ("result",)
    num_regions = 0
    traits = frozenset({"pure"})

    def verify_op(self):
        s, r = self.input.type, self.result.type
        if not _value_type_ok(s) or with_element_type(s, element_type(r)) != r:
            raise self.error(f"cannot cast {s} to {r}: only the element type may change")

    def print_custom(self, p):
        p.write("kernel.cast ", p.value(self.input), " : ", p.type(self.input.type), " to ", p.type(self.result.type))


class SplatOp(KernelOp):
    """A register tile (or fragment) with every element equal to a scalar, or a tile broadcast to a larger one
    along its dimensions of size 1."""

    name = "kernel.splat"
    operand_names = ("input",)
    result_names = ("result",)
    num_regions = 0
    traits = frozenset({"pure"})

    def verify_op(self):
        r, s = self.result.type, self.input.type
        if not isinstance(r, (TensorType, FragType)) or element_type(r) != element_type(s):
            raise self.error(f"splats a {s} into a tile of the same element type, not {r}")
        if isinstance(s, TensorType):
            try:
                ok = isinstance(r, TensorType) and broadcast_shape([s.shape, r.shape]) == r.shape
            except ValueError:
                ok = False
            if not ok:
                raise self.error(f"cannot broadcast {s} to {r}")
        elif not isinstance(s, ScalarType):
            raise self.error(f"splats a scalar or a register tile, not {s}")

    def print_custom(self, p):
        p.write("kernel.splat ", p.value(self.input), " : ", p.type(self.result.type))


class ReshapeOp(KernelOp):
    """The same register tile (its elements in the same order) with another shape: free. A fragment reshapes to
    the register tile of its lane's elements (an accumulator's are row-major over the lane's points) and back."""

    name = "kernel.reshape"
    operand_names = ("input",)
    result_names = ("result",)
    num_regions = 0
    traits = frozenset({"pure"})

    def verify_op(self):
        s, r = self.input.type, self.result.type
        sizes = [t.numel if isinstance(t, TensorType) else getattr(t, "per_lane", None) for t in (s, r)]
        frags = isinstance(s, FragType) + isinstance(r, FragType)
        if None in sizes or frags > 1 or element_type(s) != element_type(r) or sizes[0] != sizes[1]:
            raise self.error(
                f"reshapes a register tile (or a fragment's lane elements) to a tile of the same element type and "
                f"size, or back, not {s} to {r}"
            )

    def print_custom(self, p):
        s, r = self.input.type, self.result.type
        p.write("kernel.reshape ", p.value(self.input), " : ", p.type(s), " to ", p.type(r))


def _check_position(op, t, pos) -> None:
    shape = t.shape if isinstance(t, TensorType) else (t.per_lane,) if isinstance(t, FragType) else None
    if shape is None:
        raise op.error(f"needs a register tile or fragment, got {t}")
    if len(pos) != len(shape) or any(not isinstance(i, int) or not 0 <= i < d for i, d in zip(pos, shape)):
        raise op.error(f"position {list(pos)} is outside {list(shape)}")


class ExtractOp(KernelOp):
    """One element of a register tile (or of this lane's fragment), at a constant position."""

    name = "kernel.extract"
    operand_names = ("tile",)
    result_names = ("result",)
    attribute_types = {"position": tuple}
    num_regions = 0
    traits = frozenset({"pure"})

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        return [element_type(operand_types[0])]

    def verify_op(self):
        _check_position(self, self.tile.type, self.attributes["position"])
        if self.result.type != element_type(self.tile.type):
            raise self.error(f"result must be {element_type(self.tile.type)}")

    def print_custom(self, p):
        pos = ", ".join(map(str, self.attributes["position"]))
        p.write("kernel.extract ", p.value(self.tile), f"[{pos}] : ", p.type(self.result.type))


class InsertOp(KernelOp):
    """A register tile (or fragment) equal to another but for one element at a constant position."""

    name = "kernel.insert"
    operand_names = ("element", "tile")
    result_names = ("result",)
    attribute_types = {"position": tuple}
    num_regions = 0
    traits = frozenset({"pure"})

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        return [operand_types[1]]

    def verify_op(self):
        _check_position(self, self.tile.type, self.attributes["position"])
        if self.element.type != element_type(self.tile.type) or self.result.type != self.tile.type:
            raise self.error(f"inserts a {element_type(self.tile.type)} into {self.tile.type}")

    def print_custom(self, p):
        pos = ", ".join(map(str, self.attributes["position"]))
        p.write("kernel.insert ", p.value(self.element), " into ", p.value(self.tile), f"[{pos}]")
        p.write(" : ", p.type(self.tile.type))


class ReduceOp(KernelOp):
    """Combine the elements of one thread's register tile over some axes (all by default) with a monoid; `into
    %acc` folds them into an accumulator, one element after another in order (a sum of products then compiles to
    a chain of fused multiply-adds)."""

    name = "kernel.reduce"
    operand_names = ("input", "*init")
    result_names = ("result",)
    attribute_types = {"kind": str, "axes": tuple}
    num_regions = 0
    traits = frozenset({"pure"})

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        t = operand_types[0]
        axes = attributes["axes"]
        keep = tuple(d for i, d in enumerate(t.shape) if i not in axes)
        return [TensorType(t.dtype, keep) if keep else t.dtype]

    def verify_op(self):
        t, kind, axes = self.input.type, self.attributes["kind"], self.attributes["axes"]
        if len(self.init) > 1 or (self.init and self.init[0].type != self.result.type):
            raise self.error(f"folds into one accumulator of the result type {self.result.type}")
        simple = [n for n, m in MONOIDS.items() if m.width == 1]
        if kind not in simple:
            raise self.error(
                f"reduces with a one-value monoid ({', '.join(simple)}), not '{kind}'; compound carriers (online)"
                " combine through their scalar ops (KernelBuilder.combine)"
            )
        if not isinstance(t, TensorType):
            raise self.error(f"reduces a register tile, not {t}")
        if not axes or len(set(axes)) != len(axes) or any(not isinstance(a, int) or not 0 <= a < t.rank for a in axes):
            raise self.error(f"axes {list(axes)} are not distinct axes of {t}")
        if self.result.type != self.infer_result_types([t], self.attributes)[0]:
            raise self.error(f"result type must be {self.infer_result_types([t], self.attributes)[0]}")

    def print_custom(self, p):
        t, axes = self.input.type, self.attributes["axes"]
        p.write("kernel.reduce ", self.attributes["kind"], " ", p.value(self.input))
        if tuple(axes) != tuple(range(t.rank)):
            p.write(" axes [", ", ".join(map(str, axes)), "]")
        if self.init:
            p.write(" into ", p.value(self.init[0]))
        p.write(" : ", p.type(t))
