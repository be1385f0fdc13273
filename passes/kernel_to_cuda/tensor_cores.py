"""kernel-to-cuda's statements for tensor cores (`dialects/kernel/ops/tensor_cores.py`): fragment loads and
stores element by element, ldmatrix in groups of 8 x 8 matrices, mma.sync atoms, and the ghost registers of the
atoms' top halves."""

from __future__ import annotations

from irforge.dialects.kernel import fragments
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel.types import FragType, PtrType

from irforge import index_expr as ix
from irforge.ir import Value

from .c_text import c_index


class TensorCoreStatements:
    """Mixed into the kernel emitter (it supplies `k`, `line`, `name`, `ctype`, `unrolled`, `smem_offset`,
    `smem_address`, `depth`)."""

    def frag_elements(self, op, frag: FragType, mem: Value) -> list[str]:
        """Pointer expression of each of this lane's fragment elements."""
        vals = op.index_operands
        n = len(vals)
        extra = ["irf_g", "irf_t", "irf_wg"]
        g, t_, w = ix.Dim(n), ix.Dim(n + 1), ix.Dim(n + 2)
        return [self.tile_point(op, mem, row, col, extra) for row, col in frag.points(g, t_, w)]

    def tile_point(self, op, mem: Value, row, col, extra) -> str:
        """`mem[...]` of the point (row, col) of the tile whose first element `op` indexes (expressions whose
        dimensions past the op's index operands are `extra` names)."""
        return f"{self.name(mem)}[{self.tile_offset(op, mem, row, col, extra)}]"

    def tile_offset(self, op, mem: Value, row, col, extra, scale: int = 1) -> str:
        """The element offset in `mem` of `tile_point`'s point, times `scale` (`smem_offset`)."""
        vals = op.index_operands
        n = len(vals)
        valid = op.attributes.get("rows")
        if valid:  # a ghost row (past the valid ones, fewer than twice as many) reads the last valid one
            row = row - (row // valid) * (row - (valid - 1))
        if "transpose" in op.attributes:
            row, col = col, row
        exprs = list(op.exprs("index"))
        if isinstance(mem.type, PtrType):
            e = exprs[0] + row * op.attributes["stride"] + col
            names = [self.name(v) for v in vals]
            text = c_index(ix.scaled(e, scale), lambda i: names[i] if i < n else extra[i - n])
        else:
            rows_dim = op.attributes.get("rows_dim", -2)
            exprs[rows_dim] = exprs[rows_dim] + row
            exprs[-1] = exprs[-1] + col
            text = self.smem_offset(exprs, vals, mem.type, extra, scale=scale)
        return text

    def op_frag_load(self, op):
        r, t = op.result, op.result.type
        self.line(f'{self.ctype(t)} {self.name(r)}[{t.per_lane}];  // this lane\'s share of the "{t.role}" fragment')
        for j, src in enumerate(self.frag_elements(op, t, op.mem)):
            self.line(f"{self.name(r)}[{j}] = {src};")

    def op_frag_store(self, op):
        for j, dst in enumerate(self.frag_elements(op, op.frag.type, op.mem)):
            self.line(f"{dst} = {self.name(op.frag)}[{j}];")

    def op_ldmatrix(self, op):
        """Up to four 8 x 8 matrices an instruction: lane l gives the address of row l % 8 of matrix l / 8; a memory
        row runs along the tile's rows unless the tile is stored transposed. A lane's pair runs along the tile's
        rows for "a" and down its columns for "b": `.trans` where memory rows cross that."""
        t = op.result.type
        name = self.name(op.result)
        self.line(f'{self.ctype(t)} {name}[{t.per_lane}];  // this lane\'s share of the "{t.role}" fragment')
        transposed = "transpose" in op.attributes
        trans = "true" if transposed != (t.role == "b") else "false"
        n = len(op.index_operands)
        row_in, mat = ix.Dim(n), ix.Dim(n + 1)
        self.line("{")
        self.depth += 1
        self.line("const int irf_lrow = irf_lane & 7, irf_lmat = irf_lane >> 3;")
        for first, count, (r0, c0) in _ldmatrix_groups(fragments.operand_matrices(t.role, t.shape)):
            # matrix q of a group of two or four sits 8 rows (q odd) and 8 columns (q >= 2) past the first
            row = ix.Const(r0) + (mat % 2) * 8 if count > 1 else ix.Const(r0)
            col = ix.Const(c0) + (mat // 2) * 8 if count > 2 else ix.Const(c0)
            row, col = (row, col + row_in) if transposed else (row + row_in, col)
            at = self.tile_offset(op, op.mem, row, col, ["irf_lrow", "irf_lmat"], scale=op.mem.type.dtype.bytes)
            addr = self.smem_address(op.mem, at)
            self.line(f"irf_ldmatrix<{count}, {trans}>({name} + {2 * first}, {addr});")
        self.depth -= 1
        self.line("}")

    def op_mma(self, op):
        r = op.result
        t = r.type
        d = self.name(r)
        a, b, c = (self.name(v) for v in op.operands)
        self.line(f"float {d}[{t.per_lane}];")
        self.unrolled(t.per_lane, f"{d}[irf_e] = {c}[irf_e];")
        top = fragments.half("mma", "acc", t.shape)  # the atoms' top half: rows 8-15 of A are zeros
        am, an = max(1, t.shape[0] // 16), t.shape[1] // 8
        per_a, per_b, per_acc = (4, 4, 2) if top else (8, 4, 4)
        call = "irf_mma_m16n8k16_top" if top else "irf_mma_m16n8k16"
        for i in range(am):
            for j in range(an):
                acc = [f"{d}[{fragments.acc_element(t.shape, i, j, k)}]" for k in range(per_acc)]
                if top:
                    acc += [f"{self.ghosts[op]}[{2 * (i * an + j) + k}]" for k in range(2)]
                self.line(f"{call}({', '.join(acc)}, {a} + {per_a * i}, {b} + {per_b * j});")

    def ghost_declarations(self) -> None:
        """Rows 8-15 of each top-half atom's accumulators (`irf_mma_m16n8k16_top`): registers of their own for each
        chain of mma ops (one accumulating into another's result shares its registers), zeroed once for the kernel.
        An atom then accumulates in place; with a fresh pair of zeros for each atom, ptxas copied the accumulators
        into a new register quad around each mma (F4's decode attention: 154 of its loop's 500 instructions)."""
        self.ghosts: dict = {}
        for op in self.k.walk():
            if not (isinstance(op, K.MmaOp) and fragments.half("mma", "acc", op.result.type.shape)):
                continue
            chained = self.ghosts.get(op.operands[2].owner)
            if chained is None:
                chained = f"irf_ghost{len(set(self.ghosts.values()))}"
                self.line(f"float {chained}[{op.result.type.per_lane}];  // the atoms' rows 8-15: results dropped")
                self.unrolled(op.result.type.per_lane, f"{chained}[irf_e] = 0.0f;")
            self.ghosts[op] = chained


def _ldmatrix_groups(mats: list[tuple[int, int]]) -> list[tuple[int, int, tuple[int, int]]]:
    """(first matrix, count, its origin) of each ldmatrix instruction: four matrices where they sit as a 16 x 16
    square in register order ((0, 0), (8, 0), (0, 8), (8, 8) from the first), else two stacked, else one."""
    out, k = [], 0
    while k < len(mats):
        r, c = mats[k]
        for count in (4, 2, 1):
            want = [(r + 8 * (q % 2), c + 8 * (q // 2)) for q in range(count)]
            if mats[k : k + count] == want:
                out.append((k, count, (r, c)))
                k += count
                break
    return out
