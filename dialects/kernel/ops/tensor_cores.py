"""Tensor cores: a warp's mma fragments loaded and stored (`ldmatrix` included) and `mma.sync`."""

from __future__ import annotations

from irforge.index_expr import AffineMap
from irforge.ir import Value

from ..types import FragType, PtrType, SmemType
from .base import _UNIT_T, IndexedOp, KernelOp


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
