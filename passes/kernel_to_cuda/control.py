"""kernel-to-cuda's statements for control flow (`dialects/kernel/ops/control.py`): `kernel.for` with its
carries declared before the loop and assigned at its yield, and `kernel.if` with its results declared before the
branches."""

from __future__ import annotations

from .c_text import _is_array, _numel


class ControlStatements:
    """Mixed into the kernel emitter (it supplies `line`, `name`, `ctype`, `index`, `assign`, `unrolled`,
    `region_body`, `index_t`)."""

    def op_for(self, op):
        lo, hi = self.index(op, "lower")[0], self.index(op, "upper")[0]
        step = op.attributes["step"]
        for c, init in zip(op.carries, op.inits):
            n = self.name(c)
            if _is_array(c.type):
                self.line(f"{self.ctype(c.type)} {n}[{_numel(c.type)}];")
                self.assign(n, init)
            else:
                self.line(f"{self.ctype(c.type)} {n} = {self.name(init)};")
        unroll = op.attributes.get("unroll")
        if unroll is not None:
            self.line("#pragma unroll" if unroll == 0 else f"#pragma unroll {unroll}")
        iv = self.name(op.induction_var)
        inc = f"++{iv}" if step == 1 else f"{iv} += {step}"
        self.line(f"for ({self.index_t} {iv} = {lo}; {iv} < {hi}; {inc}) {{")

        def on_yield(y):
            carries = list(op.carries)
            swaps = any(v in carries and carries.index(v) != i for i, v in enumerate(y.values))
            if not swaps:
                for c, v in zip(carries, y.values):
                    if v is not c:
                        self.assign(self.name(c), v)
                return
            temps = []
            for i, v in enumerate(y.values):  # a carry yields another: go through temporaries
                tmp = f"irf_next{i}"
                if _is_array(v.type):
                    self.line(f"{self.ctype(v.type)} {tmp}[{_numel(v.type)}];")
                    self.unrolled(_numel(v.type), f"{tmp}[irf_e] = {self.name(v)}[irf_e];")
                else:
                    self.line(f"const {self.ctype(v.type)} {tmp} = {self.name(v)};")
                temps.append(tmp)
            for c, tmp in zip(carries, temps):
                if _is_array(c.type):
                    self.unrolled(_numel(c.type), f"{self.name(c)}[irf_e] = {tmp}[irf_e];")
                else:
                    self.line(f"{self.name(c)} = {tmp};")

        self.region_body(op.body, on_yield)
        self.line("}")
        for r, c in zip(op.results, op.carries):
            if _is_array(r.type):
                self.line(f"const {self.ctype(r.type)} (&{self.name(r)})[{_numel(r.type)}] = {self.name(c)};")
            else:
                self.line(f"const {self.ctype(r.type)} {self.name(r)} = {self.name(c)};")

    def op_if(self, op):
        for r in op.results:
            dims = f"[{_numel(r.type)}]" if _is_array(r.type) else ""
            self.line(f"{self.ctype(r.type)} {self.name(r)}{dims};")

        def on_yield(y):
            for r, v in zip(op.results, y.values):
                self.assign(self.name(r), v)

        self.line(f"if ({self.name(op.cond)}) {{")
        self.region_body(op.regions[0].block, on_yield)
        if op.regions[1].block.ops:
            self.line("} else {")
            self.region_body(op.regions[1].block, on_yield)
        self.line("}")

    def op_yield(self, op):
        raise op.error("must end a kernel.for or kernel.if region")
