"""Parse callbacks for the cuda dialect's custom syntax (`cuda.lark`)."""

from __future__ import annotations

from irforge.parser import OpAST

from ..launch import launch_dims


class CudaSyntax:
    def cuda_ints(self, c):
        return [int(t) for t in c]

    def cuda_kernel(self, c):
        sym, params, grid, block, smem, attrs, source = c
        a = dict(attrs) if attrs else {}
        body = str(source)[len("{{{\n") : -len("}}}")]
        if "source" not in a or body:  # an escaped source attribute (printed when the raw block cannot hold it)
            a["source"] = body
        a.update(
            sym_name=sym.name,
            params=tuple(params or ()),
            grid=launch_dims(grid),
            block=launch_dims(block),
            smem=int(smem),
        )
        return OpAST("cuda.kernel", attrs=a, result_types=[])

    def cuda_program(self, c):
        sym, attrs, region = c
        return OpAST(
            "cuda.program",
            attrs={**(dict(attrs) if attrs else {}), "sym_name": sym.name},
            result_types=[],
            regions=[region],
        )

    def cuda_input(self, c):
        pos, t = c
        return OpAST("cuda.input", attrs={"position": int(pos)}, result_types=[t])

    def cuda_param(self, c):
        sym, t = c
        return OpAST("cuda.param", attrs={"sym": sym}, result_types=[t])

    def cuda_state(self, c):
        sym, t = c
        return OpAST("cuda.state", attrs={"sym": sym}, result_types=[t])

    def cuda_alloc(self, c):
        attrs, t = c
        return OpAST("cuda.alloc", attrs=dict(attrs or {}), result_types=[t])

    def cuda_view(self, c):
        v, t = c
        return OpAST("cuda.view", operands=[v], result_types=[t])

    def cuda_launch(self, c):
        sym, uses = c
        return OpAST("cuda.launch", operands=uses or [], attrs={"callee": sym}, result_types=[])

    def cuda_output(self, c):
        return OpAST("cuda.output", operands=c[0] or [], result_types=[])
