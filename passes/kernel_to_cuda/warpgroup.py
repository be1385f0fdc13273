"""kernel-to-cuda's statements for warpgroup MMA (`dialects/kernel/warpgroup.py`): descriptors built from the
operand buffers' layouts, `wgmma.mma_async` with the accumulator's registers listed in PTX's order, and the
fence / commit / wait of its groups."""

from __future__ import annotations

import dataclasses

from irforge.dialects.kernel import fragments


class WarpgroupStatements:
    """Mixed into the kernel emitter (it supplies `line`, `name`, `smem_offset`, `unrolled`)."""

    def wgmma_descriptor(self, op, which: str) -> str:
        """`irf_wgmma_desc(&tile, layout)`: the tile's first element, its offset taken without the buffer's swizzle
        (the tensor cores apply it to the addresses they derive), or'ed with the layout fields."""
        mem = getattr(op, which)
        t = mem.type
        plain = dataclasses.replace(t, swizzle=())
        offset = self.smem_offset(op.exprs(f"index_{which}"), op.index_operands, plain)
        layout = op.descriptor(which).bits(0)
        return f"irf_wgmma_desc(&{self.name(mem)}[{offset}], {layout:#x}ull)"

    def op_wgmma(self, op):
        r, t = op.result, op.result.type
        d, c = self.name(r), self.name(op.c)
        n = t.shape[1]
        self.line(f"float {d}[{t.per_lane}];")
        self.unrolled(t.per_lane, f"{d}[irf_e] = {c}[irf_e];")
        regs = [fragments.acc_element(t.shape, 0, j, k, "wgmma") for j in range(n // 8) for k in range(4)]
        dtype = op.b.type.dtype.name
        listed = ", ".join(f"%{i}" for i in range(len(regs)))
        trans_b = int("transpose" in op.attributes)
        ins = []
        if op.registers_a:  # the lane's 8 elements of A, packed in pairs as mma.sync's A registers are
            a = self.name(op.a)
            ins += [f'"r"(irf_pack2({a}[{2 * i}], {a}[{2 * i + 1}]))' for i in range(4)]
            first = len(regs)
            operand_a = "{" + ", ".join(f"%{first + i}" for i in range(4)) + "}"
            scales = f"p, 1, 1, {trans_b}"  # no transpose of A from registers
        else:
            ins.append('"l"(irf_da)')
            operand_a = f"%{len(regs)}"
            scales = f"p, 1, 1, 0, {trans_b}"
        operand_b = f"%{len(regs) + len(ins)}"
        ins.append('"l"(irf_db)')
        self.line("{")
        self.depth += 1
        if not op.registers_a:
            self.line(f"const unsigned long long irf_da = {self.wgmma_descriptor(op, 'a')};")
        self.line(f"const unsigned long long irf_db = {self.wgmma_descriptor(op, 'b')};")
        self.line(
            f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n'
            f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{dtype}.{dtype} {{{listed}}}, {operand_a}, {operand_b}, "
            f'{scales};\\n}}\\n"'
        )
        self.depth += 1
        self.line(": " + ", ".join(f'"+f"({d}[{e}])' for e in regs))
        self.line(": " + ", ".join(ins) + ");")
        self.depth -= 2
        self.line("}")

    def op_wgmma_fence(self, op):
        self.line("irf_wgmma_fence();")

    def op_wgmma_commit(self, op):
        self.line("irf_wgmma_commit();")

    def op_setmaxnreg(self, op):
        action, count = op.attributes["action"], op.attributes["count"]
        self.line(f'asm volatile("setmaxnreg.{action}.sync.aligned.u32 {count};\\n" ::: "memory");')

    def op_wgmma_wait(self, op):
        self.line(f"irf_wgmma_wait<{op.attributes['pending']}>();")
