"""The `tensor` dialect: whole-tensor algebra with static shapes, the contract for every level below.

Seven ops, all pure. Elementwise math names an entry of the one scalar table (`irforge.scalar_ops`); reductions
name a monoid (`scalar_ops.MONOIDS`) and keep the reduced axes as size 1; data movement is an index map from output
coordinates to input coordinates (`tensor.index_map`) or a gather through an index tensor. Shapes never broadcast
implicitly: every operand of an elementwise op has the result's shape. docs/dialects/tensor.md is the reference.

    %w = tensor.param @norm.weight : f32[2048]
    %e = tensor.constant 1e-06 : f32[1,32,1]
    %i = tensor.iota dim 1 : i64[4,8]
    %y = tensor.elementwise mul %x, %x : f32[1,32,2048]
    %s = tensor.reduce add %y axes [2] : f32[1,32,1]
    %b = tensor.index_map %s[d0, d1, 0] : f32[1,32,2048]
    %g = tensor.gather %table[%ids[d0, d1], d2] : f32[2,5,64]
"""

from __future__ import annotations

from irforge import index_expr as ix
from irforge.attributes import SymbolRef
from irforge.dialect import Dialect, grammar_file
from irforge.index_expr import AffineMap
from irforge.ir import Operation
from irforge.parser import OpAST, ValueLeaf
from irforge.scalar_ops import MONOIDS, SCALAR_OPS
from irforge.types import TensorType, boolean

# The monoids a tensor.reduce names: those carrying one value (compound carriers such as `online` are the loop
# level's business, built from these by fusion).
REDUCTIONS = tuple(name for name, m in MONOIDS.items() if m.width == 1)


def _tensor_result(op: Operation) -> TensorType:
    t = op.result.type
    if not isinstance(t, TensorType):
        raise op.error(f"must produce a tensor, not {t}")
    return t


def _check_in_bounds(op: Operation, m: AffineMap, out_shape, in_shape, what: str) -> None:
    """Every output coordinate must land inside the input: checked by interval arithmetic over the output box."""
    if 0 in out_shape:
        return
    for axis, (e, n) in enumerate(zip(m.results, in_shape)):
        r = ix.value_range(e, out_shape)
        if r is None or r[0] < 0 or r[1] >= n:
            span = "unbounded" if r is None else f"{r[0]}..{r[1]}"
            raise op.error(f"{what} coordinate {axis} ({e}) ranges over {span}, outside 0..{n - 1}")


class ParamOp(Operation):
    """A named parameter (weight, buffer, constant tensor); its value lives outside the IR, in a param store."""

    name = "tensor.param"
    operand_names = ()
    result_names = ("result",)
    attribute_types = {"sym": SymbolRef}
    num_regions = 0
    traits = frozenset({"pure"})

    def verify_(self):
        _tensor_result(self)

    def print_custom(self, p):
        p.write("tensor.param ", str(self.attributes["sym"]), " : ", p.type(self.result.type))


class ConstantOp(Operation):
    """A tensor whose every element is one scalar `value`."""

    name = "tensor.constant"
    operand_names = ()
    result_names = ("result",)
    attribute_types = {"value": (bool, int, float)}
    num_regions = 0
    traits = frozenset({"pure"})

    def verify_(self):
        t = _tensor_result(self)
        v = self.attributes["value"]
        if t.dtype == boolean and not isinstance(v, bool):
            raise self.error(f"a bool constant needs true or false, got {v}")
        if t.dtype.is_int and not (isinstance(v, int) and not isinstance(v, bool)):
            raise self.error(f"an {t.dtype} constant needs an integer, got {v}")
        if t.dtype.is_float and isinstance(v, bool):
            raise self.error(f"an {t.dtype} constant needs a number, got {v}")

    def print_custom(self, p):
        p.write("tensor.constant ", p.attr(self.attributes["value"]), " : ", p.type(self.result.type))


class IotaOp(Operation):
    """Each element is its own coordinate along dimension `dim` (integer result)."""

    name = "tensor.iota"
    operand_names = ()
    result_names = ("result",)
    attribute_types = {"dim": int}
    num_regions = 0
    traits = frozenset({"pure"})

    def verify_(self):
        t = _tensor_result(self)
        if not 0 <= self.attributes["dim"] < t.rank:
            raise self.error(f"dim {self.attributes['dim']} is not a dimension of {t}")
        if not t.dtype.is_int:
            raise self.error(f"produces coordinates, so needs an integer element type, not {t.dtype}")

    def print_custom(self, p):
        p.write(f"tensor.iota dim {self.attributes['dim']} : ", p.type(self.result.type))


class ElementwiseOp(Operation):
    """Apply scalar op `op` (an entry of `irforge.scalar_ops`) to same-shaped operands, element by element."""

    name = "tensor.elementwise"
    operand_names = ("*inputs",)
    result_names = ("result",)
    attribute_types = {"op": str}
    num_regions = 0
    traits = frozenset({"pure"})

    def verify_(self):
        t = _tensor_result(self)
        sop = SCALAR_OPS.get(self.attributes["op"])
        if sop is None:
            raise self.error(f"unknown scalar op '{self.attributes['op']}'")
        types = [v.type for v in self.operands]
        if len(types) != sop.arity:
            raise self.error(f"'{sop.name}' takes {sop.arity} operand(s), got {len(types)}")
        for i, ot in enumerate(types):
            if not isinstance(ot, TensorType) or ot.shape != t.shape:
                raise self.error(
                    f"operand #{i} has type {ot}, but elementwise operands must have the result's shape "
                    f"[{','.join(map(str, t.shape))}] (broadcast with tensor.index_map)"
                )
        if sop.kind == "cast":
            return
        try:
            want = sop.result_type([ot.dtype for ot in types])
        except ValueError as e:
            raise self.error(str(e)) from None
        if want != t.dtype:
            raise self.error(f"'{sop.name}' of {', '.join(str(x.dtype) for x in types)} gives {want}, not {t.dtype}")

    def print_custom(self, p):
        p.write("tensor.elementwise ", self.attributes["op"], " ", p.values(self.operands))
        p.write(" : ", p.type(self.result.type))


class ReduceOp(Operation):
    """Combine elements along `axes` with monoid `kind`; reduced axes stay, with size 1."""

    name = "tensor.reduce"
    operand_names = ("input",)
    result_names = ("result",)
    attribute_types = {"kind": str, "axes": tuple}
    num_regions = 0
    traits = frozenset({"pure"})

    def verify_(self):
        t = _tensor_result(self)
        kind, axes = self.attributes["kind"], self.attributes["axes"]
        if kind not in REDUCTIONS:
            raise self.error(f"unknown reduction '{kind}'; reductions are {', '.join(REDUCTIONS)}")
        it = self.input.type
        if not isinstance(it, TensorType):
            raise self.error(f"reduces a tensor, not {it}")
        if list(axes) != sorted(set(axes)) or any(not isinstance(a, int) or not 0 <= a < it.rank for a in axes):
            raise self.error(f"axes {list(axes)} must be distinct dimensions of {it}, in increasing order")
        want = tuple(1 if i in axes else n for i, n in enumerate(it.shape))
        if t.dtype != it.dtype or t.shape != want:
            raise self.error(f"reducing {it} over axes {list(axes)} gives {it.with_shape(want)}, not {t}")
        if it.dtype == boolean and kind in ("add", "mul"):
            raise self.error(f"'{kind}' does not reduce bool; cast to an integer first")

    def print_custom(self, p):
        axes = ", ".join(map(str, self.attributes["axes"]))
        p.write(f"tensor.reduce {self.attributes['kind']} ", p.value(self.input), f" axes [{axes}]")
        p.write(" : ", p.type(self.result.type))


class IndexMapOp(Operation):
    """`result[d0, ..., dn] = input[map(d0, ..., dn)]`: broadcast, transpose, reshape, slice, ... in one op."""

    name = "tensor.index_map"
    operand_names = ("input",)
    result_names = ("result",)
    attribute_types = {"map": AffineMap}
    num_regions = 0
    traits = frozenset({"pure"})

    def verify_(self):
        t = _tensor_result(self)
        m, it = self.attributes["map"], self.input.type
        if not isinstance(it, TensorType) or it.dtype != t.dtype:
            raise self.error(f"maps {it} to {t}: the element types must agree")
        if m.num_dims != t.rank or len(m.results) != it.rank:
            raise self.error(
                f"map {m} must take the {t.rank} result coordinate(s) to the {it.rank} input coordinate(s)"
            )
        _check_in_bounds(self, m, t.shape, it.shape, "input")

    def print_custom(self, p):
        m = self.attributes["map"]
        p.write("tensor.index_map ", p.value(self.input), "[", ", ".join(r.format() for r in m.results), "]")
        p.write(" : ", p.type(self.result.type))


class GatherOp(Operation):
    """`result[d] = input[c]` where `c[axis] = indices[index_map(d)]` and the other coordinates are `map(d)`."""

    name = "tensor.gather"
    operand_names = ("input", "indices")
    result_names = ("result",)
    attribute_types = {"axis": int, "map": AffineMap, "index_map": AffineMap}
    num_regions = 0
    traits = frozenset({"pure"})

    def coordinate_exprs(self) -> list:
        """The input coordinates as written: `map`'s results with None at `axis` (the looked-up index)."""
        exprs: list = list(self.attributes["map"].results)
        exprs.insert(self.attributes["axis"], None)
        return exprs

    def verify_(self):
        t = _tensor_result(self)
        a = self.attributes
        it, xt = self.input.type, self.indices.type
        if not isinstance(it, TensorType) or it.dtype != t.dtype:
            raise self.error(f"gathers from {it} into {t}: the element types must agree")
        if not isinstance(xt, TensorType) or not xt.dtype.is_int:
            raise self.error(f"indices must be an integer tensor, not {xt}")
        if not 0 <= a["axis"] < it.rank:
            raise self.error(f"axis {a['axis']} is not a dimension of {it}")
        m, im = a["map"], a["index_map"]
        if m.num_dims != t.rank or len(m.results) != it.rank - 1:
            raise self.error(
                f"map {m} must take the {t.rank} result coordinate(s) to {it.rank - 1} input coordinate(s)"
            )
        if im.num_dims != t.rank or len(im.results) != xt.rank:
            raise self.error(f"index_map {im} must take the {t.rank} result coordinate(s) to the {xt.rank} of indices")
        rest = it.shape[: a["axis"]] + it.shape[a["axis"] + 1 :]
        _check_in_bounds(self, m, t.shape, rest, "input")
        _check_in_bounds(self, im, t.shape, xt.shape, "indices")

    def print_custom(self, p):
        idx = "[" + ", ".join(r.format() for r in self.attributes["index_map"].results) + "]"
        coords = [p.value(self.indices) + idx if e is None else e.format() for e in self.coordinate_exprs()]
        p.write("tensor.gather ", p.value(self.input), "[", ", ".join(coords), "]")
        p.write(" : ", p.type(self.result.type))


class ScatterOp(Operation):
    """`result = base` with slices of `updates` written along `axis` at the positions `indices` holds:
    `result[..., indices[k], ...] = updates[..., k, ...]` (index_copy). The inverse of a one-axis gather."""

    name = "tensor.scatter"
    operand_names = ("base", "indices", "updates")
    result_names = ("result",)
    attribute_types = {"axis": int}
    num_regions = 0
    traits = frozenset({"pure"})

    def verify_(self):
        t = _tensor_result(self)
        bt, xt, ut = self.base.type, self.indices.type, self.updates.type
        axis = self.attributes["axis"]
        if bt != t:
            raise self.error(f"scatters into {bt} but gives {t}: the base and the result have one type")
        if not isinstance(xt, TensorType) or not xt.dtype.is_int or xt.rank != 1:
            raise self.error(f"indices must be a 1-D integer tensor, not {xt}")
        if not 0 <= axis < t.rank:
            raise self.error(f"axis {axis} is not a dimension of {t}")
        want = t.with_shape(t.shape[:axis] + xt.shape + t.shape[axis + 1 :])
        if ut != want:
            raise self.error(
                f"writes {xt.shape[0]} slice(s) along axis {axis} of {t}, so updates must be {want}, not {ut}"
            )

    def print_custom(self, p):
        p.write("tensor.scatter ", p.value(self.updates), " into ", p.value(self.base))
        p.write(f" along {self.attributes['axis']} at ", p.value(self.indices), " : ", p.type(self.result.type))


def _index_exprs(exprs) -> tuple:
    for e in exprs:
        for leaf in _leaves(e):
            if isinstance(leaf, ValueLeaf):
                raise _err(f"'%{leaf.ref.name}' cannot appear in an index; coordinates are d0, d1, ...", leaf.ref.loc)
    return tuple(exprs)


def _leaves(e):
    kids = e.children()
    if not kids:
        yield e
    for k in kids:
        yield from _leaves(k)


def _err(msg, loc):
    from irforge.diagnostics import error

    return error(msg, loc)


def _affine(exprs, t, loc) -> AffineMap:
    exprs = _index_exprs(exprs)
    if not isinstance(t, TensorType):
        raise _err(f"the result must be a tensor type, not {t}", loc)
    try:
        return AffineMap(t.rank, exprs)
    except ValueError as e:
        raise _err(f"{e} (one per dimension of the result {t})", loc) from None


class TensorSyntax:
    def tensor_param(self, c):
        sym, t = c
        return OpAST("tensor.param", attrs={"sym": sym}, result_types=[t])

    def tensor_constant(self, c):
        value, t = c
        return OpAST("tensor.constant", attrs={"value": value}, result_types=[t])

    def tensor_iota(self, c):
        dim, t = c
        return OpAST("tensor.iota", attrs={"dim": int(dim)}, result_types=[t])

    def tensor_elementwise(self, c):
        name, uses, t = c
        return OpAST("tensor.elementwise", operands=uses, attrs={"op": str(name)}, result_types=[t])

    def tensor_reduce(self, c):
        kind, src, *rest = c
        t = rest[-1]
        axes = tuple(int(a) for a in rest[:-1] if a is not None)
        return OpAST(
            "tensor.reduce", operands=[self.ref(src)], attrs={"kind": str(kind), "axes": axes}, result_types=[t]
        )

    def tensor_index_map(self, c):
        src, *rest = c
        t = rest[-1]
        exprs = [e for e in rest[:-1] if e is not None]
        m = _affine(exprs, t, self.loc_of(src))
        return OpAST("tensor.index_map", operands=[self.ref(src)], attrs={"map": m}, result_types=[t])

    def tensor_scatter(self, c):
        updates, base, axis, idx, t = c
        operands = [self.ref(base), self.ref(idx), self.ref(updates)]
        return OpAST("tensor.scatter", operands=operands, attrs={"axis": int(axis)}, result_types=[t])

    def tensor_gather_index(self, c):
        return ("index", c[0], [e for e in c[1:] if e is not None])

    def tensor_gather(self, c):
        src, *coords = c
        t = coords.pop()
        loc = self.loc_of(src)
        found = [i for i, x in enumerate(coords) if isinstance(x, tuple)]
        if len(found) != 1:
            raise _err(f"tensor.gather takes exactly one indexed coordinate (%idx[...]), found {len(found)}", loc)
        axis = found[0]
        _, idx_tok, idx_exprs = coords[axis]
        others = [x for i, x in enumerate(coords) if i != axis]
        attrs = {
            "axis": axis,
            "map": _affine(others, t, loc),
            "index_map": _affine(idx_exprs, t, self.loc_of(idx_tok)),
        }
        return OpAST("tensor.gather", operands=[self.ref(src), self.ref(idx_tok)], attrs=attrs, result_types=[t])


OPS = (ParamOp, ConstantOp, IotaOp, ElementwiseOp, ReduceOp, IndexMapOp, GatherOp, ScatterOp)

dialect = Dialect(
    name="tensor",
    summary="whole-tensor algebra: elementwise, reduce, index_map, gather, scatter, constants and params",
    ops=OPS,
    level="tensor",
    grammar=grammar_file(__name__, "tensor.lark"),
    syntax=TensorSyntax,
    interpreter="irforge.dialects.tensor.interpreter:interpret",
)
