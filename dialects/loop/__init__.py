"""The `loop` dialect: a program as kernels (loop nests) and the buffers between them (docs/dialects/loop.md).

    func.func @forward(%x: f32[16,64], %w: f32[64,16]) -> f32[16,16] {
      %out = loop.buffer f32[16,16]
      loop.kernel @k_relu {
        loop.for %a0 in 0..16 {                                  // free (parallel) loop
          loop.for %a1 in 0..16 {
            %acc = loop.reduce %a2 in 0..64 add(0.0) -> f32 {    // reduce loop: monoid add, init 0.0
              %x0 = loop.load %x[%a0, %a2]
              %w0 = loop.load %w[%a2, %a1]
              %p = scalar.mul %x0, %w0 : f32
              loop.yield %p                                      // one element per iteration
            }
            %zero = scalar.const 0.0 : f32
            %r = scalar.maximum %acc, %zero : f32
            loop.store %out[%a0, %a1] = %r
          }
        }
      }
      func.return %out
    }

Buffers are tensor-typed SSA values: function arguments (inputs and parameters, read-only) and `loop.buffer`s
(intermediates and outputs; an output is a buffer the function returns). Kernels run in order; each buffer is
written by one kernel and read only after it. A kernel reads its buffers directly (it is not isolated from above),
and never reads a buffer it writes, so loads inside a kernel are pure.
"""

from __future__ import annotations

import re

from irforge.attributes import SymbolRef
from irforge.dialect import Dialect, grammar_file
from irforge.index_expr import AffineMap
from irforge.ir import Block, Operation, OpResult, Region
from irforge.location import UNKNOWN
from irforge.parser import OpAST, RegionAST, bind_index_values
from irforge.scalar_ops import MONOIDS
from irforge.types import index

from . import indexing
from .indexing import kernel_of


# ---- program structure ----------------------------------------------------------------------------------------
class KernelOp(indexing.KernelBase):
    """One kernel: a loop nest that reads buffers and writes others. Pipelines reach it as `kernel(...)`."""

    name = "loop.kernel"
    operand_names = ()
    result_names = ()
    attribute_types = {"sym_name": str}
    num_regions = 1
    traits = frozenset({"single_block", "no_terminator"})
    anchor_aliases = ("kernel",)

    @staticmethod
    def build(name: str, loc=UNKNOWN, attributes=None) -> KernelOp:
        return KernelOp((), (), {**(attributes or {}), "sym_name": name}, [Region([Block()])], loc)

    @property
    def sym_name(self) -> str:
        return self.attributes["sym_name"]

    def stored_buffers(self) -> list:
        """Buffers this kernel writes, in order of first store."""
        return list(dict.fromkeys(op.buffer for op in self.walk() if isinstance(op, StoreOp)))

    def loaded_buffers(self) -> list:
        """Buffers this kernel reads, in order of first load."""
        return list(dict.fromkeys(op.buffer for op in self.walk() if isinstance(op, LoadOp)))

    def verify_(self):
        from irforge.builtin import FuncOp

        parent = self.parent_op
        if not isinstance(parent, FuncOp):
            raise self.error("must be directly inside a func.func")
        for other in self.parent.ops:
            if other is self:
                break
            if isinstance(other, KernelOp) and other.sym_name == self.sym_name:
                raise self.error(f"redefines kernel '@{self.sym_name}'", notes=[("first defined here", other.loc)])
        written = set()
        for op in self.walk():
            if isinstance(op, StoreOp):
                buf = op.buffer
                if not (isinstance(buf, OpResult) and isinstance(buf.op, BufferOp)):
                    raise op.error("writes a function argument or param; inputs and params are read-only")
                written.add(op.buffer)
        for op in self.walk():
            if isinstance(op, LoadOp) and op.buffer in written:
                raise op.error("reads a buffer its own kernel writes; a kernel's loads must not see its stores")
        self._verify_state(parent, written)

    def _verify_state(self, func, written) -> None:
        """A state's argument and its result buffer are one memory: once a kernel writes the result, the value on
        entry is gone, so neither this kernel nor a later one may read the argument."""
        ret = func.body.ops[-1] if func.body.ops else None
        if ret is None or ret.name != "func.return":
            return
        for name, arg, pos in func.state_pairs():
            if pos >= len(ret.operands) or ret.operands[pos] not in written:
                continue
            later = func.body.ops[func.body.ops.index(self) :]
            for k in later:
                for op in k.walk():
                    if isinstance(op, LoadOp) and op.buffer is arg:
                        raise op.error(
                            f"reads state '{name}' on entry after kernel '@{self.sym_name}' updated it in place"
                        )

    def print_custom(self, p):
        p.write("loop.kernel ", str(SymbolRef(self.sym_name)))
        p.attr_dict(self.attributes, elide=("sym_name",), prefix=" attributes ")
        p.write(" ")
        p.region(self.regions[0])


class BufferOp(indexing.BufferValueOp):
    """A buffer the program allocates: an intermediate, or an output when the function returns it."""

    name = "loop.buffer"

    def verify_(self):
        super().verify_()
        writers, readers = [], []
        for user in self.result.users:
            k = kernel_of(user)
            if k is None or k.parent is not self.parent:
                continue  # a store or load outside a kernel, or a misplaced kernel: its own verifier says where
            if isinstance(user, StoreOp) and user.buffer is self.result and k not in writers:
                writers.append(k)
            elif isinstance(user, LoadOp):
                readers.append((user, k))
        if len(writers) > 1:
            raise writers[1].error(
                f"writes a buffer that kernel '@{writers[0].sym_name}' writes too; each buffer has one writer",
                notes=[("the other writer", writers[0].loc)],
            )
        if writers:
            block = self.parent
            at = block.ops.index(writers[0])
            for load, k in readers:
                if block.ops.index(k) < at:
                    raise load.error(f"reads a buffer before kernel '@{writers[0].sym_name}' writes it")


class ParamOp(indexing.ParamValueOp):
    """A named, read-only buffer whose value lives in the program's param store (a weight): `@name` as at the
    tensor level."""

    name = "loop.param"


# ---- loops -----------------------------------------------------------------------------------------------------
class LoopOp(indexing.LoopBase):
    """Shared by free and reduce loops: `%iv in 0..extent`, one block whose only argument is the index.

    Loops always start at 0 with step 1; offsets and strides live in the subscripts.
    """

    num_regions = 1
    traits = frozenset({"single_block"})

    @property
    def iv(self):
        return self.body.args[0]

    @property
    def extent(self) -> int:
        return self.attributes["extent"]

    @property
    def extents(self) -> tuple[int, ...]:
        return (self.extent,)

    def _verify_header(self):
        if self.extent < 0:
            raise self.error(f"has a negative extent {self.extent}")
        args = self.body.args
        if len(args) != 1 or args[0].type != index:
            raise self.error("needs exactly one block argument, of type index (the loop index)")
        if kernel_of(self) is None:
            raise self.error("must be inside a loop.kernel")

    def _print_header(self, p, keyword: str):
        p.write(keyword, " ", p.define(self.iv), f" in 0..{self.extent}")


class ForOp(LoopOp):
    """A free (parallel) loop: iterations are independent; its body stores results, it yields nothing."""

    name = "loop.for"
    operand_names = ()
    result_names = ()
    attribute_types = {"extent": int}

    @staticmethod
    def build(extent: int, iv_hint: str | None = None, loc=UNKNOWN) -> ForOp:
        return ForOp((), (), {"extent": extent}, [Region([Block([index], [iv_hint])])], loc)

    def verify_(self):
        self._verify_header()
        if any(isinstance(a, ReduceOp) for a in self.ancestors()):
            raise self.error("cannot be inside a loop.reduce (a reduction's body only computes its elements)")

    def print_custom(self, p):
        self._print_header(p, "loop.for")
        p.attr_dict(self.attributes, elide=("extent",), prefix=" attributes ")
        p.write(" ")
        p.region(self.regions[0], print_entry_args=False)


class ReduceOp(LoopOp):
    """A reduce loop: folds the element its body yields each iteration into carriers, one monoid per carrier.

    `monoids` names entries of `irforge.scalar_ops.MONOIDS`; `init[i]` holds carrier i's starting values (one per
    component: `add(0.0)`, `online(-inf, 0.0)`). The results are the carriers' components, in order; the body yields
    one element (a value per component) per iteration, and the result is `combine(...combine(init, e0)..., e{n-1})`.
    The body only computes: no stores, no free loops.
    """

    name = "loop.reduce"
    operand_names = ()
    attribute_types = {"extent": int, "monoids": tuple, "init": tuple}
    traits = frozenset({"single_block", "pure"})

    @staticmethod
    def build(extent: int, carriers, result_types, iv_hint=None, result_hints=None, loc=UNKNOWN):
        """`carriers` = [(monoid name, init values), ...]; the body must still get its ops and a loop.yield."""
        attrs = {
            "extent": extent,
            "monoids": tuple(m for m, _ in carriers),
            "init": tuple(tuple(i) for _, i in carriers),
        }
        region = Region([Block([index], [iv_hint])])
        return ReduceOp((), list(result_types), attrs, [region], loc, result_hints=result_hints)

    @property
    def carriers(self) -> list[tuple]:
        """[(Monoid, init values, result values)] per carrier."""
        out, at = [], 0
        for name, init in zip(self.attributes["monoids"], self.attributes["init"]):
            out.append((MONOIDS[name], init, self.results[at : at + len(init)]))
            at += len(init)
        return out

    @property
    def yielded(self) -> tuple:
        return self.body.ops[-1].operands

    def verify_(self):
        self._verify_header()
        indexing.verify_reduction(self, YieldOp, StoreOp)

    def print_custom(self, p):
        carriers = ", ".join(
            f"{m}({', '.join(p.attr(v) for v in init)})"
            for m, init in zip(self.attributes["monoids"], self.attributes["init"])
        )
        self._print_header(p, "loop.reduce")
        p.write(" ", carriers, " -> ", p.types(r.type for r in self.results))
        p.attr_dict(self.attributes, elide=("extent", "monoids", "init"), prefix=" attributes ")
        p.write(" ")
        p.region(self.regions[0], print_entry_args=False)


class YieldOp(Operation):
    """Ends a loop.reduce body: the element this iteration contributes (one value per carrier component)."""

    name = "loop.yield"
    operand_names = ("*values",)
    result_names = ()
    num_regions = 0
    traits = frozenset({"terminator"})

    def verify_(self):
        if not isinstance(self.parent_op, ReduceOp):
            raise self.error("must end a loop.reduce body")

    def print_custom(self, p):
        if self.attributes:
            return p.print_generic(self)
        p.write("loop.yield ", p.values(self.operands))


# ---- memory and indices ----------------------------------------------------------------------------------------
class LoadOp(indexing.LoadValueOp):
    """Read one element of a buffer."""

    name = "loop.load"


class StoreOp(indexing.StoreValueOp):
    """Write one element of a buffer (only in a kernel body or a free loop, never in a reduction)."""

    name = "loop.store"


class IndexOp(indexing.IndexValueOp):
    """An index value computed from others: `loop.index %a0 * 64 + %a1` (a subscript, named)."""

    name = "loop.index"


# ---- queries passes share --------------------------------------------------------------------------------------
def loc_names(loc) -> list[str]:
    """The origins a location names (`aten.softmax.int` -> `softmax`), in order, without repeats."""
    from irforge.location import FusedLoc, NameLoc

    out: list[str] = []
    stack = [loc]
    while stack:
        cur = stack.pop(0)
        if isinstance(cur, FusedLoc):
            stack[:0] = list(cur.locs)
        elif isinstance(cur, NameLoc):
            parts = cur.name.split(".")  # namespace.op[.overload]: "aten.softmax.int" -> "softmax"
            name = re.sub(r"[^A-Za-z0-9_]+", "_", parts[1] if len(parts) > 1 else parts[0]).strip("_")
            if name and name not in out:
                out.append(name)
    return out


def kernel_name(loc, fallback: str, taken) -> str:
    """`k_<what it computes>` from the torch ops the location names (at most three), else `fallback` as it is;
    made unique in `taken` (a set of names, which learns the new one)."""
    names = loc_names(loc)
    base = "k_" + "_".join(names[:3]) if names else fallback
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


# ---- syntax ----------------------------------------------------------------------------------------------------
class LoopSyntax:
    def loop_kernel(self, c):
        sym, attrs, region = c
        a = {**dict(attrs or {}), "sym_name": sym.name}
        return OpAST("loop.kernel", attrs=a, result_types=[], regions=[region])

    def loop_buffer(self, c):
        return OpAST("loop.buffer", result_types=[c[0]])

    def loop_param(self, c):
        sym, t = c
        return OpAST("loop.param", attrs={"sym": sym}, result_types=[t])

    def loop_for(self, c):
        iv, lo, hi, attrs, region = c
        a = {**dict(attrs or {}), "extent": _extent(self, lo, hi)}
        return OpAST("loop.for", attrs=a, result_types=[], regions=[_with_iv(self, region, iv)])

    def loop_reduce(self, c):
        iv, lo, hi, *rest = c
        carriers = [x for x in rest if isinstance(x, tuple)]
        types, attrs, region = rest[len(carriers) :]
        a = {
            **dict(attrs or {}),
            "extent": _extent(self, lo, hi),
            "monoids": tuple(m for m, _ in carriers),
            "init": tuple(i for _, i in carriers),
        }
        return OpAST("loop.reduce", attrs=a, result_types=types, regions=[_with_iv(self, region, iv)])

    def loop_carrier(self, c):
        return (str(c[0]), tuple(c[1:]))

    def loop_yield(self, c):
        return OpAST("loop.yield", operands=c[0], result_types=[])

    def loop_load(self, c):
        buf, (m, refs) = c
        return OpAST("loop.load", operands=[self.ref(buf), *refs], attrs={"index": m})

    def loop_store(self, c):
        buf, (m, refs), value = c
        return OpAST("loop.store", operands=[self.ref(buf), *refs, value], attrs={"index": m}, result_types=[])

    def loop_index(self, c):
        exprs, refs = bind_index_values([c[0]])
        return OpAST("loop.index", operands=refs, attrs={"expr": AffineMap(len(refs), tuple(exprs))})

    def loop_subscript(self, c):
        exprs, refs = bind_index_values([e for e in c if e is not None])
        return AffineMap(len(refs), tuple(exprs)), refs


def _extent(syntax, lo, hi) -> int:
    if int(lo) != 0:
        from irforge.diagnostics import error

        raise error("loops run from 0 (write 0..N and offset the subscripts)", syntax.loc_of(lo))
    return int(hi)


def _with_iv(syntax, region: RegionAST, iv_tok) -> RegionAST:
    return region.with_entry_args([(syntax.ref(iv_tok), index)])


dialect = Dialect(
    name="loop",
    summary="kernels as loop nests: free and reduce loops, loads, stores, buffers",
    ops=(KernelOp, BufferOp, ParamOp, ForOp, ReduceOp, YieldOp, LoadOp, StoreOp, IndexOp),
    level="loop",
    grammar=grammar_file(__name__, "loop.lark"),
    syntax=LoopSyntax,
    interpreter="irforge.dialects.loop.interpreter:interpret",
)
