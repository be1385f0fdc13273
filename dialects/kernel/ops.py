"""The kernel dialect's operations: a structured SIMT IR, one statement per hardware primitive.

Every op that addresses memory or computes an index does so with index expressions (`irforge.index_expr`) whose
dimensions are SSA index values: the values are trailing operands, and each expression list is an `AffineMap`
attribute over them (`index`, `lower`, `coords`, ...). The custom syntax writes the values in place
(`kernel.load %x[%row * 2048 + %col] : f32[4]`); the generic form shows the maps. `Val(v)` builds such
expressions in Python (`Val(row) * 2048 + Val(col)`), and `bind_values` turns them into maps and operands.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from irforge import index_expr as ix
from irforge.attributes import UNIT, SymbolRef
from irforge.index_expr import AffineMap, IndexExpr
from irforge.ir import Block, Operation, Region, Value
from irforge.scalar_ops import MONOIDS, SCALAR_OPS
from irforge.target import target
from irforge.types import FunctionType, ScalarType, TensorType, boolean, index

from ..launch import dims_text, launch_dims
from .types import (
    FragType,
    MbarrierType,
    PtrType,
    SmemType,
    TensorMapType,
    element_type,
    tma_swizzle,
    with_element_type,
)

AXES = ("x", "y", "z")
_UNIT_T = type(UNIT)
LAUNCH_AXES = tuple(f"{k}Idx.{d}" for k in ("thread", "block") for d in "xyz")


# ---- index expressions over SSA values -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, eq=False)
class Val(IndexExpr):
    """An SSA index value inside an index expression built in Python (compared by identity)."""

    value: Value

    def format(self, leaf=None) -> str:
        return f"%{self.value.name_hint or '?'}"


def bind_values(groups: list[list[IndexExpr]]) -> tuple[list[AffineMap], list[Value]]:
    """Number the values in `groups` (lists of expressions with `Val` leaves) by first appearance: one map per group,
    all over the same dimensions, and the values in dimension order (the op's index operands)."""
    values: list[Value] = []
    slot: dict[int, int] = {}

    def go(e: IndexExpr) -> IndexExpr:
        if isinstance(e, Val):
            if id(e.value) not in slot:
                slot[id(e.value)] = len(values)
                values.append(e.value)
            return ix.Dim(slot[id(e.value)])
        kids = e.children()
        return e.rebuild([go(k) for k in kids]) if kids else e

    bound = [[go(ix.as_expr(e)) for e in g] for g in groups]
    return [AffineMap(len(values), tuple(b)) for b in bound], values


class KernelOp(Operation):
    """Base of the device-side ops: they live inside a `kernel.func`."""

    device: ClassVar[bool] = True

    def verify_(self):
        if self.device and enclosing_kernel(self) is None:
            raise self.error("must be inside a kernel.func")
        self.verify_op()

    def verify_op(self) -> None:
        """Op-specific checks (after the placement check)."""


def enclosing_kernel(op: Operation) -> KernelFuncOp | None:
    return next((a for a in op.ancestors() if isinstance(a, KernelFuncOp)), None)


class IndexedOp(KernelOp):
    """An op with index expressions: `num_fixed` leading operands, then the index values of its maps.

    `index_groups` names the AffineMap attributes (all over the same dimensions); `group_sizes` says how many
    expressions each must hold (checked by `verify_op`)."""

    num_fixed: ClassVar[int] = 0
    index_groups: ClassVar[tuple[str, ...]] = ("index",)

    @property
    def index_operands(self) -> tuple[Value, ...]:
        n = self.attributes[self.index_groups[0]].num_dims
        return self.operands[self.num_fixed : self.num_fixed + n]

    def exprs(self, group: str) -> tuple[IndexExpr, ...]:
        return self.attributes[group].results

    def group_sizes(self) -> dict[str, int | None]:
        """Expected number of expressions per group (None: any)."""
        return {}

    def verify_indices(self) -> None:
        maps = [self.attributes[g] for g in self.index_groups]
        n = maps[0].num_dims
        if any(m.num_dims != n for m in maps):
            raise self.error("index maps must all be over the same dimensions")
        if len(self.operands) < self.num_fixed + n:
            raise self.error(f"has {len(self.operands)} operands but its index maps need {self.num_fixed + n}")
        for v in self.index_operands:
            if v.type != index:
                raise self.error(f"index operands must have type index, got {v.type}")
        for g, want in self.group_sizes().items():
            got = len(self.attributes[g].results)
            if want is not None and got != want:
                raise self.error(f"needs {want} index expression(s) in '{g}', got {got}")

    def fmt(self, p, group: str) -> str:
        """The expressions of `group`, comma-separated, with SSA values in place of dimensions."""
        vals = self.index_operands
        return ", ".join(p.index_expr(e, vals) for e in self.exprs(group))


def _attrs_of(cls) -> dict:
    return {**cls.attribute_types, **cls.optional_attributes}


def _mem_rank(t) -> int:
    return len(t.shape) if isinstance(t, SmemType) else 1


# ---- kernels and the host side ---------------------------------------------------------------------------------
class KernelFuncOp(Operation):
    """A GPU kernel: typed pointer (or tensor-map) parameters, a fixed launch shape, a SIMT body that every thread
    of every block runs."""

    name = "kernel.func"
    operand_names = ()
    result_names = ()
    attribute_types = {"sym_name": str, "function_type": FunctionType, "grid": tuple, "block": tuple}
    optional_attributes = {"index_bits": int}
    num_regions = 1
    traits = frozenset({"isolated", "symbol", "single_block"})
    anchor_aliases = ("kernel",)

    @staticmethod
    def build(name: str, param_types, grid, block, arg_hints=None, attributes=None, loc=None) -> KernelFuncOp:
        from irforge.location import UNKNOWN

        attrs = {
            **(attributes or {}),
            "sym_name": name,
            "function_type": FunctionType(tuple(param_types), ()),
            "grid": launch_dims(grid),
            "block": launch_dims(block),
        }
        return KernelFuncOp((), (), attrs, [Region([Block(param_types, arg_hints)])], loc or UNKNOWN)

    @property
    def args(self):
        return self.body.args

    @property
    def threads(self) -> int:
        x, y, z = self.attributes["block"]
        return x * y * z

    def verify_(self):
        ft = self.attributes["function_type"]
        if ft.outputs:
            raise self.error("a kernel returns nothing; write results through pointer parameters")
        if tuple(a.type for a in self.body.args) != ft.inputs:
            raise self.error(f"arguments {[str(a.type) for a in self.body.args]} do not match its type {ft}")
        for t in ft.inputs:
            if not isinstance(t, (PtrType, TensorMapType)):
                # Shapes are static, so sizes are constants in the body; launches bind buffers only.
                raise self.error(f"parameter type must be !kernel.ptr or !kernel.tensormap, got {t}")
        for what in ("grid", "block"):
            dims = self.attributes[what]
            if len(dims) != 3 or any(not isinstance(d, int) or isinstance(d, bool) or d <= 0 for d in dims):
                raise self.error(f"'{what}' must be 1 to 3 positive integers, got {list(dims)}")
        limit = target().max_threads
        if self.threads > limit:
            raise self.error(f"has {self.threads} threads per block; the limit is {limit}")
        if self.attributes.get("index_bits", 32) not in (32, 64):
            raise self.error("'index_bits' must be 32 or 64")
        if self.parent_op is not None and self.parent_op.name != "builtin.module":
            raise self.error("must be at the top level of a module")

    def print_custom(self, p):
        p.write("kernel.func ", str(SymbolRef(self.attributes["sym_name"])), "(")
        p.write(", ".join(f"{p.define(a)}: {a.type}" for a in self.body.args), ")")
        p.write(" grid(", dims_text(self.attributes["grid"]), ") block(", dims_text(self.attributes["block"]), ")")
        p.attr_dict(self.attributes, elide=("sym_name", "function_type", "grid", "block"), prefix=" attributes ")
        p.write(" ")
        p.region(self.regions[0], print_entry_args=False)


class HostOp(Operation):
    """Base of the host-side ops: they live in a `func.func` that allocates buffers and launches kernels."""

    def verify_(self):
        if enclosing_kernel(self) is not None:
            raise self.error("is a host op; it cannot be inside a kernel.func")
        self.verify_op()

    def verify_op(self) -> None:
        pass


# The buffers of a host program, shared with the cuda dialect's host ops: `<op> : type`, `<op> @name : type`,
# `<op> %source : type`.
class AllocBase(Operation):
    operand_names = ()
    result_names = ("result",)
    num_regions = 0

    def verify_op(self):
        if not isinstance(self.result.type, TensorType):
            raise self.error(f"allocates a tensor, not {self.result.type}")

    def print_custom(self, p):
        p.write(self.name)
        p.attr_dict(self.attributes)
        p.write(" : ", p.type(self.result.type))


class ParamBase(Operation):
    operand_names = ()
    result_names = ("result",)
    attribute_types = {"sym": SymbolRef}
    num_regions = 0
    traits = frozenset({"pure"})

    def verify_op(self):
        if not isinstance(self.result.type, TensorType):
            raise self.error(f"binds a tensor, not {self.result.type}")

    def print_custom(self, p):
        p.write(self.name, " ", str(self.attributes["sym"]), " : ", p.type(self.result.type))


class ViewBase(Operation):
    operand_names = ("source",)
    result_names = ("result",)
    num_regions = 0
    traits = frozenset({"pure"})

    def verify_op(self):
        s, r = self.source.type, self.result.type
        if not (isinstance(s, TensorType) and isinstance(r, TensorType)) or s.dtype != r.dtype or s.numel != r.numel:
            raise self.error(f"cannot view {s} as {r}: element type and count must match")

    def print_custom(self, p):
        p.write(self.name, " ", p.value(self.source), " : ", p.type(self.result.type))


class AllocOp(AllocBase, HostOp):
    """A device buffer (an intermediate or an output), allocated once by the runtime."""

    name = "kernel.alloc"


class ParamOp(ParamBase, HostOp):
    """A named parameter (a weight) whose value lives in the program's param store, as `tensor.param` has it."""

    name = "kernel.param"


class ViewOp(ViewBase, HostOp):
    """The same buffer seen with another shape (same element type and element count): costs nothing."""

    name = "kernel.view"


class LaunchBase(Operation):
    """`<op> @callee(%buffers)`: a kernel of the module launched on host buffers, in program order; the callee's
    parameter types (`callee_params`) say what each buffer binds. Shared with the cuda dialect's launch."""

    operand_names = ("*args",)
    result_names = ()
    attribute_types = {"callee": SymbolRef}
    num_regions = 0
    callee_type: ClassVar[type[Operation]]  # the op a callee is

    def callee_op(self) -> Operation | None:
        top = self
        while top.parent_op is not None:
            top = top.parent_op
        name = self.attributes["callee"].name
        for op in top.body.ops if top.regions else ():
            if isinstance(op, self.callee_type) and op.attributes["sym_name"] == name:
                return op
        return None

    def callee_params(self, callee: Operation) -> list:
        """The callee's parameter types."""
        raise NotImplementedError

    def verify_op(self):
        k = self.callee_op()
        if k is None:
            raise self.error(
                f"launches '@{self.attributes['callee'].name}', which is not a {self.callee_type.name} of the module"
            )
        params = self.callee_params(k)
        if len(params) != len(self.args):
            raise self.error(f"passes {len(self.args)} argument(s) to a kernel with {len(params)} parameter(s)")
        for i, (v, t) in enumerate(zip(self.args, params)):
            ok = isinstance(v.type, TensorType) and (
                (isinstance(t, PtrType) and v.type.dtype == t.dtype)
                or (isinstance(t, TensorMapType) and (v.type.dtype, v.type.shape) == (t.dtype, t.shape))
            )
            if not ok:
                raise self.error(f"argument #{i} is {v.type}, which cannot bind parameter type {t}")


class LaunchOp(LaunchBase, HostOp):
    """Launch a kernel of the module on host buffers, in program order (a buffer for each pointer or tensor-map
    parameter)."""

    name = "kernel.launch"
    callee_type = KernelFuncOp

    def callee_params(self, callee: Operation) -> list:
        return callee.attributes["function_type"].inputs

    def verify_op(self):
        super().verify_op()
        written = _written_params(self.callee_op())
        for i, v in enumerate(self.args):
            for j in range(i + 1, len(self.args)):
                if self.args[j] is v and (i in written or j in written):
                    raise self.error(f"passes one buffer as arguments #{i} and #{j}, and the kernel writes one of them")

    def print_custom(self, p):
        p.write("kernel.launch ", str(self.attributes["callee"]), "(", p.values(self.args), ")")
        p.attr_dict(self.attributes, elide=("callee",))


def _written_params(k: KernelFuncOp) -> set[int]:
    """Indices of the pointer parameters a kernel stores or atomically updates through."""
    args = {a: i for i, a in enumerate(k.body.args)}
    out = set()
    for op in k.walk():
        if isinstance(op, (StoreOp, AtomicOp, FragStoreOp)) and op.mem in args:
            out.add(args[op.mem])
    return out


# ---- thread geometry -------------------------------------------------------------------------------------------
class _AxisOp(KernelOp):
    operand_names = ()
    result_names = ("result",)
    attribute_types = {"dim": str}
    num_regions = 0
    traits = frozenset({"pure"})

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        return [index]

    def verify_op(self):
        if self.attributes["dim"] not in AXES:
            raise self.error(f"dimension must be x, y or z, got {self.attributes['dim']!r}")
        if self.result.type != index:
            raise self.error("result must be index")

    def print_custom(self, p):
        p.write(self.name, " ", self.attributes["dim"])


class ThreadIdOp(_AxisOp):
    """`threadIdx.<dim>`: this thread's position in its block."""

    name = "kernel.thread_id"


class BlockIdOp(_AxisOp):
    """`blockIdx.<dim>`: this block's position in the grid."""

    name = "kernel.block_id"


class BlockDimOp(_AxisOp):
    """`blockDim.<dim>`: threads per block along a dimension (a constant of the kernel)."""

    name = "kernel.block_dim"


class GridDimOp(_AxisOp):
    """`gridDim.<dim>`: blocks in the grid along a dimension (a constant of the kernel)."""

    name = "kernel.grid_dim"


class _LinearOp(KernelOp):
    operand_names = ()
    result_names = ("result",)
    num_regions = 0
    traits = frozenset({"pure"})

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        return [index]

    def print_custom(self, p):
        p.write(self.name)


class LaneIdOp(_LinearOp):
    """This thread's lane in its warp: the linear thread index (x fastest) modulo 32."""

    name = "kernel.lane_id"


class WarpIdOp(_LinearOp):
    """This thread's warp in its block: the linear thread index (x fastest) divided by 32."""

    name = "kernel.warp_id"


class IndexOp(IndexedOp):
    """An index value computed from an index expression (`%off = kernel.index %row * 2048 + %col`)."""

    name = "kernel.index"
    operand_names = ("*values",)
    result_names = ("result",)
    attribute_types = {"expr": AffineMap}
    num_regions = 0
    traits = frozenset({"pure"})
    index_groups = ("expr",)

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        return [index]

    def group_sizes(self):
        return {"expr": 1}

    def verify_op(self):
        self.verify_indices()
        if self.result.type != index:
            raise self.error("result must be index")

    def print_custom(self, p):
        p.write("kernel.index ", self.fmt(p, "expr"))


# ---- values: constants, scalar math, casts, register tiles -----------------------------------------------------
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


def tile_offsets(shape, strides) -> list[int]:
    """Element offsets (row-major over the tile) of a strided tile access: element i sits at sum(i_d * strides_d)."""
    out = [0]
    for n, s in zip(shape, strides):
        out = [o + k * s for o in out for k in range(n)]
    return out


def run_dim(shape, strides) -> int | None:
    """The dimension a strided tile access moves along as vectors: the last one of stride 1 and size > 1."""
    return next((d for d in reversed(range(len(shape))) if strides[d] == 1 and shape[d] > 1), None)


def access_runs(t: TensorType, strides, width: int | None = None) -> tuple[int, list[tuple[int, list[int]]]]:
    """(run, [(offset, tile positions)]): a strided tile access as runs of `run` contiguous elements along
    `run_dim` (its whole length, or `width` elements a run; 1 when there is none), each starting at an element
    offset and filling those flat tile positions."""
    shape = t.shape
    d = run_dim(shape, strides)
    if d is None or width == 1:
        return 1, [(o, [k]) for k, o in enumerate(tile_offsets(shape, strides))]
    run = width or shape[d]
    inner = math.prod(shape[d + 1 :])
    runs = []
    for k, o in enumerate(tile_offsets(shape, strides)):
        if (k // inner) % run == 0:
            runs.append((o, [k + j * inner for j in range(run)]))
    return run, runs


def default_strides(shape) -> tuple[int, ...]:
    out, n = [], 1
    for d in reversed(shape):
        out.append(n)
        n *= d
    return tuple(reversed(out))


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


# ---- control flow ----------------------------------------------------------------------------------------------
class YieldOp(KernelOp):
    """Ends a `kernel.for` body (the next values of its carries) or a `kernel.if` branch (its results)."""

    name = "kernel.yield"
    operand_names = ("*values",)
    result_names = ()
    num_regions = 0
    traits = frozenset({"terminator"})

    def verify_op(self):
        if not isinstance(self.parent_op, (ForOp, IfOp)):
            raise self.error("must end a kernel.for or kernel.if region")

    def print_custom(self, p):
        p.write("kernel.yield")
        if self.operands:
            p.write(" ", p.values(self.operands))


def _check_yield(op, block: Block, types, what: str) -> None:
    y = block.ops[-1] if block.ops and isinstance(block.ops[-1], YieldOp) else None
    got = tuple(v.type for v in y.values) if y is not None else ()
    if got != tuple(types):
        raise op.error(f"{what} must yield ({', '.join(map(str, types))}), yields ({', '.join(map(str, got))})")


class ForOp(IndexedOp):
    """A counted loop `for (i = lower; i < upper; i += step)`; bounds are index expressions. Loop-carried values
    (accumulators, register tiles) enter as `carry(%acc <- %init : type)`, are the body's block arguments after the
    induction variable, and leave as the op's results."""

    name = "kernel.for"
    operand_names = ("*bounds_and_inits",)
    attribute_types = {"lower": AffineMap, "upper": AffineMap, "step": int}
    optional_attributes = {"unroll": int}
    num_regions = 1
    traits = frozenset({"single_block"})
    index_groups = ("lower", "upper")

    @property
    def inits(self) -> tuple[Value, ...]:
        return self.operands[len(self.index_operands) :]

    @property
    def induction_var(self) -> Value:
        return self.body.args[0]

    @property
    def carries(self):
        return self.body.args[1:]

    def group_sizes(self):
        return {"lower": 1, "upper": 1}

    def verify_op(self):
        self.verify_indices()
        if self.attributes["step"] <= 0:
            raise self.error("step must be positive")
        if self.attributes.get("unroll", 1) < 0:
            raise self.error("unroll must be non-negative (0: fully)")
        args = self.body.args
        types = tuple(v.type for v in self.inits)
        if not args or args[0].type != index or tuple(a.type for a in args[1:]) != types:
            raise self.error("body arguments must be the index induction variable and one per carry")
        if tuple(r.type for r in self.results) != types:
            raise self.error("results must match the carries")
        _check_yield(self, self.body, types, "body")

    def print_custom(self, p):
        a = self.attributes
        p.write("kernel.for ", p.define(self.induction_var), " in ", self.fmt(p, "lower"), " .. ")
        p.write(self.fmt(p, "upper"))
        if a["step"] != 1:
            p.write(f" step {a['step']}")
        if self.inits:
            parts = [f"{p.define(c)} <- {p.value(v)} : {c.type}" for c, v in zip(self.carries, self.inits)]
            p.write(" carry(", ", ".join(parts), ")")
        p.attr_dict(a, elide=("lower", "upper", "step"), prefix=" attributes ")
        p.write(" ")
        p.region(self.regions[0], print_entry_args=False)


class IfOp(KernelOp):
    """`if (cond) { ... } else { ... }`; with results, both branches end in `kernel.yield`.

    `single_writer = ["threadIdx.x", ...]` marks the guard of the tile level's single-writer rule: the condition
    picks one thread per group of threads that differ only along those axes, and its then-branch does what each of
    them would do (store a value they share). The simulator checks that they agree on what the branch uses."""

    name = "kernel.if"
    operand_names = ("cond",)
    optional_attributes = {"single_writer": tuple}
    num_regions = 2
    traits = frozenset({"single_block"})

    def verify_op(self):
        if self.cond.type != boolean:
            raise self.error(f"condition must be bool, got {self.cond.type}")
        axes = self.attributes.get("single_writer", ())
        if any(a not in LAUNCH_AXES for a in axes) or len(set(axes)) != len(axes):
            raise self.error(f"single_writer names launch axes ({', '.join(LAUNCH_AXES)}), each once; got {list(axes)}")
        types = tuple(r.type for r in self.results)
        _check_yield(self, self.regions[0].block, types, "then branch")
        _check_yield(self, self.regions[1].block, types, "else branch")

    def print_custom(self, p):
        p.write("kernel.if ", p.value(self.cond))
        if self.results:
            p.write(" -> (", p.types(r.type for r in self.results), ")")
        p.attr_dict(self.attributes, prefix=" attributes ")
        p.write(" ")
        p.region(self.regions[0])
        if self.regions[1].block.ops:
            p.write(" else ")
            p.region(self.regions[1])


# ---- memory ----------------------------------------------------------------------------------------------------
class SmemOp(KernelOp):
    """A shared-memory buffer (or an array of mbarriers) of the block; `dynamic` places it in the launch's dynamic
    shared memory (needed above 48 KB)."""

    name = "kernel.smem"
    operand_names = ()
    result_names = ("result",)
    optional_attributes = {"dynamic": _UNIT_T}
    num_regions = 0

    def verify_op(self):
        if not isinstance(self.result.type, (SmemType, MbarrierType)):
            raise self.error(f"result must be !kernel.smem or !kernel.mbarrier, got {self.result.type}")
        if not isinstance(self.parent_op, KernelFuncOp):
            raise self.error("must be at the top level of the kernel body")

    def print_custom(self, p):
        t = self.result.type
        p.write("kernel.smem ")
        if "dynamic" in self.attributes:
            p.write("dynamic ")
        if isinstance(t, MbarrierType):
            p.write(f"mbarrier[{t.count}]")
        else:
            p.write(p.type(TensorType(t.dtype, t.shape)))
            if t.swizzle:
                p.write(" swizzle(", ", ".join(map(str, t.swizzle)), ")")
        p.attr_dict(self.attributes, elide=("dynamic",))


def _check_mem_access(op, mem: Value, value_type, group: str = "index") -> None:
    """A load, store or atomic of `value_type` (a scalar or a tile of contiguous elements) at `mem[group]`."""
    t = mem.type
    if not isinstance(t, (PtrType, SmemType)):
        raise op.error(f"accesses a !kernel.ptr or !kernel.smem, not {t}")
    rank = _mem_rank(t)
    if len(op.exprs(group)) != rank:
        raise op.error(f"needs {rank} index expression(s) for {t}, got {len(op.exprs(group))}")
    if element_type(value_type) != t.dtype or not isinstance(value_type, (ScalarType, TensorType)):
        raise op.error(f"moves {value_type}, which does not match the element type of {t}")
    strides = op.attributes.get("strides")
    if strides is not None and (
        not isinstance(value_type, TensorType)
        or len(strides) != value_type.rank
        or any(not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in strides)
    ):
        raise op.error(f"strides {list(strides)} must give one non-negative element stride per dimension of the tile")
    if isinstance(value_type, TensorType):
        if 0 in value_type.shape:
            raise op.error(f"moves {value_type}, a register tile with no elements")
        width = op.attributes.get("vector")
        if width is not None:
            d = run_dim(value_type.shape, strides or default_strides(value_type.shape))
            if not isinstance(width, int) or width < 1 or (d is not None and value_type.shape[d] % width):
                raise op.error(f"vector {width} must divide the length of the tile's contiguous runs")
        run, _ = access_runs(value_type, strides or default_strides(value_type.shape), width)
        if isinstance(t, SmemType) and run > t.shape[-1]:
            raise op.error(f"moves {run} contiguous elements, more than a row of {t}")
        nbytes = run * t.dtype.bytes
        if not (nbytes <= 16 and nbytes & (nbytes - 1) == 0) and nbytes % 16 != 0:
            raise op.error(f"moves {nbytes} bytes; vector accesses move 1, 2, 4, 8 or 16 bytes, or multiples of 16")
    if op.attributes.get("xor_runs") and not (isinstance(t, SmemType) and t.swizzle):
        raise op.error(f"xor_runs addresses runs through a swizzle, and {t} has none")


class LoadOp(IndexedOp):
    """Read a scalar, or a register tile of contiguous elements (a vector access of up to 16 bytes at a time, so
    the address must be aligned to the access), from global or shared memory. With `strides`, tile element
    (i0, i1, ...) is at the address plus sum(i_d * strides_d) elements, and the last dimension of stride 1 moves
    as vectors (`{strides = [64, 1]} : f32[2,4]` reads two rows of four), `vector` elements at a time when the
    addresses are only aligned to that many. `xor_runs` (a swizzled shared memory): the lowering proved that no
    run's offset from the first element shares a bit with that element's offset, so each run's swizzled address
    is the first element's XOR the run's swizzled offset (the same addresses, one swizzle computed)."""

    name = "kernel.load"
    operand_names = ("mem", "*indices")
    result_names = ("result",)
    attribute_types = {"index": AffineMap}
    optional_attributes = {"strides": tuple, "vector": int, "xor_runs": bool}
    num_regions = 0
    num_fixed = 1

    def verify_op(self):
        self.verify_indices()
        _check_mem_access(self, self.mem, self.result.type)

    def print_custom(self, p):
        p.write("kernel.load ", p.value(self.mem), "[", self.fmt(p, "index"), "]")
        p.attr_dict(self.attributes, elide=("index",))
        p.write(" : ", p.type(self.result.type))


class StoreOp(IndexedOp):
    """Write a scalar or a register tile to global or shared memory (contiguous, or `strides`, `vector` and
    `xor_runs` as `kernel.load`)."""

    name = "kernel.store"
    operand_names = ("value", "mem", "*indices")
    result_names = ()
    attribute_types = {"index": AffineMap}
    optional_attributes = {"strides": tuple, "vector": int, "xor_runs": bool}
    num_regions = 0
    num_fixed = 2

    def verify_op(self):
        self.verify_indices()
        _check_mem_access(self, self.mem, self.value.type)

    def print_custom(self, p):
        p.write("kernel.store ", p.value(self.value), ", ", p.value(self.mem), "[", self.fmt(p, "index"), "]")
        p.attr_dict(self.attributes, elide=("index",))


class AtomicOp(IndexedOp):
    """An atomic read-modify-write of one element (`atomicAdd`; max/min on floats by compare-and-swap), or of each
    element of a register tile (at the addresses a `kernel.store` of it with the same `strides` would write)."""

    name = "kernel.atomic"
    operand_names = ("value", "mem", "*indices")
    result_names = ()
    attribute_types = {"kind": str, "index": AffineMap}
    optional_attributes = {"strides": tuple}
    num_regions = 0
    num_fixed = 2

    def verify_op(self):
        self.verify_indices()
        if self.attributes["kind"] not in ("add", "max", "min"):
            raise self.error(f"kind must be add, max or min, got {self.attributes['kind']!r}")
        if not isinstance(self.value.type, (ScalarType, TensorType)):
            raise self.error("updates a scalar element or the elements of a register tile")
        _check_mem_access(self, self.mem, self.value.type)
        if element_type(self.value.type).name in ("bool", "u8", "i8", "i16", "index"):
            raise self.error(f"no atomics on {self.value.type}")

    def print_custom(self, p):
        p.write("kernel.atomic ", self.attributes["kind"], " ", p.value(self.value), ", ", p.value(self.mem))
        p.write("[", self.fmt(p, "index"), "]")
        p.attr_dict(self.attributes, elide=("kind", "index"))


class BareOp(KernelOp):
    """An op of no operands and no results: a fence, a barrier, a commit; printed as its name."""

    operand_names = ()
    result_names = ()
    num_regions = 0

    def print_custom(self, p):
        p.write(self.name)


class GroupWaitOp(BareOp):
    """Wait until at most `pending` committed groups (of cp.async copies, of wgmmas) are in flight."""

    attribute_types = {"pending": int}

    def verify_op(self):
        if not 0 <= self.attributes["pending"] <= 7:
            raise self.error("pending must be 0 to 7")

    def print_custom(self, p):
        p.write(f"{self.name} {self.attributes['pending']}")


class BarrierOp(BareOp):
    """`__syncthreads()`: every thread of the block waits here; orders shared-memory accesses across it."""

    name = "kernel.barrier"


class FenceProxyAsyncOp(BareOp):
    """`fence.proxy.async.shared::cta`: makes this thread's ordinary shared-memory writes visible to the async
    proxy (TMA, wgmma) that reads them next."""

    name = "kernel.fence_proxy_async"


# ---- warp shuffles ---------------------------------------------------------------------------------------------
class ShuffleOp(IndexedOp):
    """Base of the warp shuffles: each lane reads `value` from another lane of its (sub-)warp of `width` lanes."""

    operand_names = ("value", "*indices")
    result_names = ("result",)
    attribute_types = {"lane": AffineMap}
    optional_attributes = {"width": int}
    num_regions = 0
    traits = frozenset({"pure"})
    num_fixed = 1
    index_groups = ("lane",)
    mode: ClassVar[str] = ""

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        return [operand_types[0]]

    def group_sizes(self):
        return {"lane": 1}

    def verify_op(self):
        self.verify_indices()
        w = self.attributes.get("width", 32)
        if w not in (1, 2, 4, 8, 16, 32):
            raise self.error(f"width must be a power of two up to 32, got {w}")
        if not isinstance(self.value.type, (ScalarType, TensorType)) or self.result.type != self.value.type:
            raise self.error(f"shuffles a scalar or register tile into the same type, got {self.value.type}")

    def print_custom(self, p):
        p.write(self.name, " ", p.value(self.value), ", ", self.fmt(p, "lane"))
        p.attr_dict(self.attributes, elide=("lane",))
        p.write(" : ", p.type(self.result.type))


class ShflXorOp(ShuffleOp):
    """`__shfl_xor_sync`: read from lane `lane ^ mask` (butterfly reductions)."""

    name = "kernel.shfl_xor"
    mode = "xor"


class ShflDownOp(ShuffleOp):
    """`__shfl_down_sync`: read from lane `lane + delta` (a lane past the end keeps its own value)."""

    name = "kernel.shfl_down"
    mode = "down"


class ShflUpOp(ShuffleOp):
    """`__shfl_up_sync`: read from lane `lane - delta` (a lane before the start keeps its own value)."""

    name = "kernel.shfl_up"
    mode = "up"


class ShflIdxOp(ShuffleOp):
    """`__shfl_sync`: read from the given lane (broadcasts)."""

    name = "kernel.shfl_idx"
    mode = "idx"


# ---- asynchronous copies ---------------------------------------------------------------------------------------
class CpAsyncOp(IndexedOp):
    """`cp.async`: copy 4, 8 or 16 contiguous bytes from global to shared memory without passing through
    registers; completes at a later `kernel.cp_async_wait` (after `kernel.cp_async_commit`)."""

    name = "kernel.cp_async"
    operand_names = ("src", "dst", "*indices")
    result_names = ()
    attribute_types = {"src_index": AffineMap, "dst_index": AffineMap, "chunk": TensorType}
    num_regions = 0
    num_fixed = 2
    index_groups = ("src_index", "dst_index")

    def verify_op(self):
        self.verify_indices()
        chunk = self.attributes["chunk"]
        if not isinstance(self.src.type, PtrType) or not isinstance(self.dst.type, SmemType):
            raise self.error("copies from a !kernel.ptr to a !kernel.smem")
        _check_mem_access(self, self.src, chunk, "src_index")
        _check_mem_access(self, self.dst, chunk, "dst_index")
        if chunk.numel * chunk.dtype.bytes not in (4, 8, 16):
            raise self.error(f"copies {chunk}, which is not 4, 8 or 16 bytes")

    def print_custom(self, p):
        p.write("kernel.cp_async ", p.value(self.src), "[", self.fmt(p, "src_index"), "] -> ")
        p.write(p.value(self.dst), "[", self.fmt(p, "dst_index"), "]")
        p.attr_dict(self.attributes, elide=("src_index", "dst_index", "chunk"))
        p.write(" : ", p.type(self.attributes["chunk"]))


class CpAsyncCommitOp(BareOp):
    """`cp.async.commit_group`: close this thread's group of pending cp.async copies."""

    name = "kernel.cp_async_commit"


class CpAsyncWaitOp(GroupWaitOp):
    """`cp.async.wait_group N`: wait until at most `pending` of this thread's committed groups are in flight."""

    name = "kernel.cp_async_wait"


# ---- mbarriers and TMA -----------------------------------------------------------------------------------------
class _MbarrierOp(IndexedOp):
    num_fixed = 1
    num_regions = 0
    result_names = ()

    def verify_bar(self):
        self.verify_indices()
        if not isinstance(self.operands[0].type, MbarrierType):
            raise self.error(f"needs a !kernel.mbarrier, got {self.operands[0].type}")


class MbarrierInitOp(_MbarrierOp):
    """`mbarrier.init`: set a barrier to expect `count` arrivals per phase (one thread does it, then a
    `kernel.barrier` publishes it)."""

    name = "kernel.mbarrier_init"
    operand_names = ("bar", "*indices")
    attribute_types = {"index": AffineMap, "count": int}

    def group_sizes(self):
        return {"index": 1}

    def verify_op(self):
        self.verify_bar()
        if self.attributes["count"] <= 0:
            raise self.error("count must be positive")

    def print_custom(self, p):
        p.write("kernel.mbarrier_init ", p.value(self.bar), "[", self.fmt(p, "index"), "], ")
        p.write(str(self.attributes["count"]))


class MbarrierArriveOp(_MbarrierOp):
    """`mbarrier.arrive`: count this thread's arrival; with `expect_tx N`, first announce N more bytes that async
    copies (TMA) will deliver to the barrier's current phase."""

    name = "kernel.mbarrier_arrive"
    operand_names = ("bar", "*indices")
    attribute_types = {"index": AffineMap}
    optional_attributes = {"expect_tx": int}

    def group_sizes(self):
        return {"index": 1}

    def verify_op(self):
        self.verify_bar()
        if self.attributes.get("expect_tx", 0) < 0:
            raise self.error("expect_tx must be non-negative")

    def print_custom(self, p):
        p.write("kernel.mbarrier_arrive ", p.value(self.bar), "[", self.fmt(p, "index"), "]")
        if "expect_tx" in self.attributes:
            p.write(f" expect_tx {self.attributes['expect_tx']}")


class MbarrierWaitOp(_MbarrierOp):
    """`mbarrier.try_wait.parity` in a loop: wait until the barrier's phase of the given parity (0 or 1) has
    completed."""

    name = "kernel.mbarrier_wait"
    operand_names = ("bar", "*indices")
    attribute_types = {"index": AffineMap, "parity": AffineMap}
    index_groups = ("index", "parity")

    def group_sizes(self):
        return {"index": 1, "parity": 1}

    def verify_op(self):
        self.verify_bar()

    def print_custom(self, p):
        p.write("kernel.mbarrier_wait ", p.value(self.bar), "[", self.fmt(p, "index"), "], parity ")
        p.write(self.fmt(p, "parity"))


class TmaLoadOp(IndexedOp):
    """`cp.async.bulk.tensor`: one thread asks the copy engine for the box of a tensor map at `coords` (element
    coordinates, outermost first); it lands in a shared-memory buffer (or the sub-buffer its leading indices pick,
    whose shape is the box), swizzled as the tensor map says, and completes the transaction bytes on an
    mbarrier."""

    name = "kernel.tma_load"
    operand_names = ("tmap", "dst", "bar", "*indices")
    result_names = ()
    attribute_types = {"coords": AffineMap, "dst_index": AffineMap, "bar_index": AffineMap}
    num_regions = 0
    num_fixed = 3
    index_groups = ("coords", "dst_index", "bar_index")

    def group_sizes(self):
        return {"coords": len(self.tmap.type.shape), "bar_index": 1}

    def verify_op(self):
        tm, dst, bar = self.tmap.type, self.dst.type, self.bar.type
        if not (isinstance(tm, TensorMapType) and isinstance(dst, SmemType) and isinstance(bar, MbarrierType)):
            raise self.error("copies from a !kernel.tensormap to a !kernel.smem, completing on a !kernel.mbarrier")
        self.verify_indices()
        k = len(self.exprs("dst_index"))
        if dst.dtype != tm.dtype or tuple(dst.shape[k:]) != tuple(tm.box):
            raise self.error(f"destination {dst} indexed by {k} must be a {tm.dtype} box of shape {list(tm.box)}")
        want = tma_swizzle(tm.swizzle, tm.dtype) if tm.swizzle else ()
        if tuple(dst.swizzle) != want:
            what = f"swizzle({', '.join(map(str, want))})" if want else "no swizzle"
            raise self.error(f"the tensor map writes its boxes with {what}, so the destination {dst} must have it")

    def print_custom(self, p):
        p.write("kernel.tma_load ", p.value(self.tmap), "[", self.fmt(p, "coords"), "] -> ", p.value(self.dst))
        if self.exprs("dst_index"):
            p.write("[", self.fmt(p, "dst_index"), "]")
        p.write(", ", p.value(self.bar), "[", self.fmt(p, "bar_index"), "]")


# ---- tensor cores ----------------------------------------------------------------------------------------------
def _check_frag_mem(op, mem: Value, frag) -> None:
    t = mem.type
    if not isinstance(frag, FragType):
        raise op.error(f"needs a !kernel.frag, got {frag}")
    if not isinstance(t, (PtrType, SmemType)) or t.dtype != frag.dtype:
        raise op.error(f"accesses {frag} in a !kernel.ptr or !kernel.smem of {frag.dtype}, not {t}")
    n = len(op.exprs("index"))
    if isinstance(t, PtrType):
        if n != 1 or "stride" not in op.attributes:
            raise op.error("on a !kernel.ptr takes one index (the tile's first element) and a row stride")
    else:
        if len(t.shape) < 2 or n != len(t.shape):
            raise op.error(f"on {t} takes {len(t.shape)} indices (the tile's first element); needs rank >= 2")
        if "stride" in op.attributes:
            raise op.error("takes its row stride from the shared-memory buffer's shape")
        if not -len(t.shape) <= op.attributes.get("rows_dim", -2) <= -2:
            raise op.error(f"rows_dim must name a dimension of {t} before its last (-{len(t.shape)} .. -2)")
    if isinstance(t, PtrType) and "rows_dim" in op.attributes:
        raise op.error("on a !kernel.ptr takes its rows' distance as `stride`, not rows_dim")
    rows = op.attributes.get("rows")
    if rows is not None and (frag.role != "a" or not frag.shape[0] // 2 <= rows < frag.shape[0]):
        raise op.error(
            f'rows = {rows}: an "a" fragment\'s valid rows, at least half its {frag.shape[0]} and fewer (the rest, '
            "ghost rows, read the last valid one)"
        )
    if "transpose" in op.attributes and frag.role == "acc":
        raise op.error("accumulators have no transposed form")


class FragLoadOp(IndexedOp):
    """Load a warp's fragment tile whose first element is at the index (rows along the second-to-last dimension
    of a shared buffer, or the one `rows_dim` names, or `stride` elements apart in global memory); `transpose`
    reads a tile stored column-major (a "b" operand stored N x K, as nn.Linear weights are); `rows` (of an "a"
    fragment): the tile's valid rows, the fragment's rows past them reading the last one (a warp's ghost rows on
    the atoms' top half). Every lane of the warp must take part."""

    name = "kernel.frag_load"
    operand_names = ("mem", "*indices")
    result_names = ("result",)
    attribute_types = {"index": AffineMap}
    optional_attributes = {"stride": int, "transpose": _UNIT_T, "rows_dim": int, "rows": int}
    num_regions = 0
    num_fixed = 1

    def verify_op(self):
        self.verify_indices()
        _check_frag_mem(self, self.mem, self.result.type)

    def print_custom(self, p):
        p.write("kernel.frag_load ", p.value(self.mem), "[", self.fmt(p, "index"), "]")
        _print_frag_options(p, self.attributes)
        p.write(" : ", p.type(self.result.type))


class FragStoreOp(IndexedOp):
    """Store a warp's fragment tile (usually the accumulator) with its first element at the index."""

    name = "kernel.frag_store"
    operand_names = ("frag", "mem", "*indices")
    result_names = ()
    attribute_types = {"index": AffineMap}
    optional_attributes = {"stride": int, "transpose": _UNIT_T, "rows_dim": int}
    num_regions = 0
    num_fixed = 2

    def verify_op(self):
        self.verify_indices()
        _check_frag_mem(self, self.mem, self.frag.type)

    def print_custom(self, p):
        p.write("kernel.frag_store ", p.value(self.frag), ", ", p.value(self.mem), "[", self.fmt(p, "index"), "]")
        _print_frag_options(p, self.attributes)


class LdmatrixOp(IndexedOp):
    """`ldmatrix`: load an "a" or "b" mma fragment of 16-bit elements from shared memory, the tile `kernel.frag_load`
    would (its first element at the index, rows along the second-to-last dimension or `rows_dim`, `transpose` for a
    tile stored column-major), as 8 x 8 matrices, four per instruction: each lane gives the address of one matrix
    row, which must be 16 contiguous bytes aligned to 16 (the simulator checks, swizzles included). Every lane of
    the warp must take part."""

    name = "kernel.ldmatrix"
    operand_names = ("mem", "*indices")
    result_names = ("result",)
    attribute_types = {"index": AffineMap}
    optional_attributes = {"transpose": _UNIT_T, "rows_dim": int, "rows": int}
    num_regions = 0
    num_fixed = 1

    def verify_op(self):
        self.verify_indices()
        t, frag = self.mem.type, self.result.type
        if not isinstance(t, SmemType):
            raise self.error(f"loads from shared memory (a !kernel.smem), not {t}")
        _check_frag_mem(self, self.mem, frag)
        if frag.layout != "mma" or frag.role not in ("a", "b") or frag.dtype.bytes != 2:
            raise self.error(f'loads "a" or "b" mma fragments of 16-bit elements, not {frag}')
        if (t.shape[-1] * 2) % 16 or (t.swizzle and t.swizzle[1] < 3):
            raise self.error(f"needs rows of whole 16-byte pieces that a swizzle keeps together, not {t}")

    def print_custom(self, p):
        p.write("kernel.ldmatrix ", p.value(self.mem), "[", self.fmt(p, "index"), "]")
        _print_frag_options(p, self.attributes)
        p.write(" : ", p.type(self.result.type))


def _print_frag_options(p, attrs) -> None:
    if "stride" in attrs:
        p.write(f" stride {attrs['stride']}")
    if "transpose" in attrs:
        p.write(" transpose")
    p.attr_dict(attrs, elide=("index", "stride", "transpose"))


class MmaOp(KernelOp):
    """`mma.sync.aligned` (m16n8k16, f16/bf16 operands, f32 accumulator): D = A x B + C for one warp's tile, A
    [M, 16] and B [16, N] in atoms of 16 x 16 and 16 x 8: (M / 16) x (N / 8) instructions."""

    name = "kernel.mma"
    operand_names = ("a", "b", "c")
    result_names = ("result",)
    num_regions = 0
    traits = frozenset({"pure"})

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        return [operand_types[2]]

    def verify_op(self):
        a, b, c = (v.type for v in self.operands)
        if not all(isinstance(t, FragType) for t in (a, b, c)) or (a.role, b.role, c.role) != ("a", "b", "acc"):
            raise self.error('takes an "a", a "b" and an "acc" fragment')
        if {a.layout, b.layout, c.layout} != {"mma"}:
            raise self.error("multiplies fragments of the mma layout")
        if a.shape[1] != 16 or b.shape[0] != 16 or (a.shape[0], b.shape[1]) != c.shape:
            raise self.error(f"no mma shape for {a}, {b}, {c}: A [M, 16] x B [16, N] into C [M, N]")
        if a.dtype != b.dtype or a.dtype.name not in ("f16", "bf16") or c.dtype.name != "f32":
            raise self.error("multiplies f16 or bf16 operands of one type into an f32 accumulator")
        if self.result.type != c:
            raise self.error(f"result must be {c}")

    def print_custom(self, p):
        p.write("kernel.mma ", p.values(self.operands), " : ", p.type(self.result.type))


OPS = (
    KernelFuncOp,
    AllocOp,
    ParamOp,
    ViewOp,
    LaunchOp,
    ThreadIdOp,
    BlockIdOp,
    BlockDimOp,
    GridDimOp,
    LaneIdOp,
    WarpIdOp,
    IndexOp,
    ConstOp,
    *SCALAR_MATH_OPS,
    CastOp,
    SplatOp,
    ReshapeOp,
    ExtractOp,
    InsertOp,
    ReduceOp,
    YieldOp,
    ForOp,
    IfOp,
    SmemOp,
    LoadOp,
    StoreOp,
    AtomicOp,
    BarrierOp,
    FenceProxyAsyncOp,
    ShflXorOp,
    ShflDownOp,
    ShflUpOp,
    ShflIdxOp,
    CpAsyncOp,
    CpAsyncCommitOp,
    CpAsyncWaitOp,
    MbarrierInitOp,
    MbarrierArriveOp,
    MbarrierWaitOp,
    TmaLoadOp,
    FragLoadOp,
    FragStoreOp,
    LdmatrixOp,
    MmaOp,
)
