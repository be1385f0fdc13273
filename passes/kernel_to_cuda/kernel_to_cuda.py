"""kernel -> cuda: the one CUDA emitter, for every kernel kind.

Each `kernel.func` becomes a `cuda.kernel` holding readable CUDA C++: one statement per kernel op, SSA names kept,
register tiles and fragments as small arrays filled by `#pragma unroll` loops (unrolled here, in the text, never in
the IR), comments naming the torch ops the statements came from (from the ops' locations). f16/bf16 values are
stored as `__half`/`__nv_bfloat16` and computed in float, rounding once per op as the simulator does. The host
`func.func` becomes a `cuda.program`: its arguments become `cuda.input`s; params, allocations, views and launches
carry over in order.

The emitter's statements for each family of ops are mixins in this package's other modules (`values`, `control`,
`memory`, `tensor_cores`, `warpgroup`, `cluster`); `c_text` has the C text they share, `launch_bounds` the kernel's
`__launch_bounds__`.
"""

from __future__ import annotations

import re

from irforge.dialects.cuda import ops as C
from irforge.dialects.cuda.prelude import PRELUDE_NAME
from irforge.dialects.kernel import dependent_launch as DL
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel.types import PtrType, element_type

from irforge.attributes import SymbolRef
from irforge.builtin import FuncOp, ReturnOp
from irforge.ir import Block, Operation, Region, Value
from irforge.location import FusedLoc, Location, NameLoc
from irforge.pass_manager import Pass
from irforge.types import TensorType

from .c_text import _is_array, _numel, c_index, c_type
from .cluster import ClusterStatements
from .control import ControlStatements
from .launch_bounds import _holds_fragments, _launch_bounds
from .memory import MemoryStatements
from .tensor_cores import TensorCoreStatements
from .values import ValueStatements
from .warpgroup import WarpgroupStatements

_RESERVED = set(
    """alignas alignof and asm auto bool break case catch char class const constexpr continue default delete do double
    else enum explicit extern false float for friend goto if inline int long mutable namespace new not operator or
    private protected public register return short signed sizeof static struct switch template this throw true try
    typedef typename union unsigned using virtual void volatile while xor threadIdx blockIdx blockDim gridDim warpSize
    min max abs exp log sqrt pow sin cos tan half float2 float4 uint2 uint4 main""".split()
)


class KernelToCuda(Pass):
    """Emit CUDA C++ for every kernel.func and turn the host function into a cuda.program."""

    name = "kernel-to-cuda"
    input_level = "kernel"
    output_level = "cuda"

    def run(self, op: Operation) -> None:
        body = op.body
        for inner in list(body.ops):
            if isinstance(inner, FuncOp) and any(isinstance(o, K.HostOp) for o in inner.body.ops):
                body.insert_before(inner, _program(inner))
                inner.erase()
        for inner in list(body.ops):
            if isinstance(inner, K.KernelFuncOp):
                body.insert_before(inner, emit_kernel(inner))
                inner.erase()


# ---- the host program ------------------------------------------------------------------------------------------
def _program(func: FuncOp) -> C.ProgramOp:
    """The host program. A state's argument and its result buffer become one `cuda.state`: the runtime keeps the
    state there, the kernels update it in place, and the program's outputs are the other results."""
    block = Block()
    vmap: dict[Value, Value] = {}
    pairs = func.state_pairs()
    ret = func.body.ops[-1]
    state_results = {ret.operands[pos] for _, _, pos in pairs}
    n_inputs = len(func.body.args) - len(pairs)
    for i, a in enumerate(func.body.args[:n_inputs]):
        op = block.append(C.InputOp((), [a.type], {"position": i}, loc=func.loc, result_hints=[a.name_hint]))
        vmap[a] = op.result
    for name, a, pos in pairs:
        op = block.append(C.StateOp((), [a.type], {"sym": SymbolRef(name)}, loc=func.loc, result_hints=[a.name_hint]))
        vmap[a] = vmap[ret.operands[pos]] = op.result
    for op in func.body.ops:
        if isinstance(op, K.AllocOp) and op.result in state_results:
            continue  # the state's own memory
        if isinstance(op, K.ParamOp):
            new = C.ParamOp(
                (), [op.result.type], {"sym": op.attributes["sym"]}, loc=op.loc, result_hints=[op.result.name_hint]
            )
        elif isinstance(op, K.AllocOp):
            new = C.AllocOp((), [op.result.type], loc=op.loc, result_hints=[op.result.name_hint])
        elif isinstance(op, K.ViewOp):
            new = C.ViewOp([vmap[op.source]], [op.result.type], loc=op.loc, result_hints=[op.result.name_hint])
        elif isinstance(op, K.LaunchOp):
            new = C.LaunchOp([vmap[v] for v in op.args], (), {"callee": op.attributes["callee"]}, loc=op.loc)
        elif isinstance(op, ReturnOp):
            new = C.OutputOp([vmap[v] for v in op.values[: len(op.values) - len(pairs)]], (), loc=op.loc)
        else:
            raise op.error("cannot be part of a cuda.program (only kernel.param, alloc, view and launch can)")
        block.append(new)
        for old, r in zip(op.results, new.results):
            vmap[old] = r
    return C.ProgramOp((), (), {"sym_name": func.attributes["sym_name"]}, [Region([block])], loc=func.loc)


# ---- kernels ---------------------------------------------------------------------------------------------------
def emit_kernel(kernel: K.KernelFuncOp) -> C.CudaKernelOp:
    """The cuda.kernel for a kernel.func: its source, parameter types, launch configuration."""
    e = _Emitter(kernel)
    source = e.emit()
    a = kernel.attributes
    attrs = {
        "sym_name": a["sym_name"],
        "params": a["function_type"].inputs,
        "grid": a["grid"],
        "block": a["block"],
        "smem": e.dynamic_smem,
        "source": source,
    }
    if any(isinstance(op, DL.GridDepWaitOp) for op in kernel.body.ops):
        attrs["dependent_launch"] = True
    return C.CudaKernelOp((), (), attrs, loc=kernel.loc)


def origin(loc: Location) -> str | None:
    """The torch-level origin of an op, from its location: named origins ("aten.mul"), with their source line."""
    if isinstance(loc, NameLoc):
        flc = loc.child.file_line_col()
        return loc.name + (f" ({flc.file}:{flc.line})" if flc is not None else "")
    if isinstance(loc, FusedLoc):
        parts = [o for o in (origin(x) for x in loc.locs) if o]
        return ", ".join(dict.fromkeys(parts)) or None
    return None


def _broadcast_index(i: str, shape, operand_shape) -> str:
    """The flat index into an operand of `operand_shape` for flat index `i` of a tile of `shape` it broadcasts to
    (a number when `i` is one)."""
    import numpy as np

    if i.isdigit():
        pos = np.unravel_index(int(i), shape)
        return str(int(np.ravel_multi_index([p if m != 1 else 0 for p, m in zip(pos, operand_shape)], operand_shape)))
    terms, inner, own = [], 1, 1
    for n, m in reversed(list(zip(shape, operand_shape))):
        if m != 1:
            pos = f"{i} / {inner}" if inner != 1 else i
            pos = f"({pos}) % {n}" if inner * n != int(np.prod(shape)) else pos
            terms.append(f"({pos}) * {own}" if own != 1 else f"({pos})")
        inner *= n
        own *= m
    return " + ".join(reversed(terms)) or "0"


class _Emitter(
    ValueStatements,
    ControlStatements,
    MemoryStatements,
    TensorCoreStatements,
    WarpgroupStatements,
    ClusterStatements,
):
    def __init__(self, kernel: K.KernelFuncOp):
        self.k = kernel
        self.index_t = "long long" if kernel.attributes.get("index_bits", 32) == 64 else "int"
        self.lines: list[str] = []
        self.depth = 1
        self.names: dict[Value, str] = {}
        self.used = set(_RESERVED)
        self.last_origin: str | None = None
        self.dynamic_smem = 0
        self.inline: dict = {}  # values emitted where their one user reads them, not as arrays
        self.fragments = _holds_fragments(kernel)
        self.written = K.written_params(kernel)
        bx, by, _ = kernel.attributes["block"]
        x, y, z = "threadIdx.x", "threadIdx.y", "threadIdx.z"
        self.linear_tid = x if kernel.attributes["block"][1:] == (1, 1) else f"({x} + {y} * {bx} + {z} * {bx * by})"

    # ---- names and text ---------------------------------------------------------------------------------------
    def name(self, v: Value) -> str:
        n = self.names.get(v)
        if n is None:
            base = re.sub(r"[^A-Za-z0-9_]", "_", v.name_hint or "") or "v"
            if base[0].isdigit() or base.startswith("irf_"):
                base = "v" + base
            n, k = base, 0
            while n in self.used:
                k += 1
                n = f"{base}_{k}"
            self.used.add(n)
            self.names[v] = n
        return n

    def line(self, text: str = "") -> None:
        self.lines.append("  " * self.depth + text if text else "")

    def ctype(self, t) -> str:
        return c_type(element_type(t), self.index_t)

    def elem(self, v: Value, i: str, within=None) -> str:
        """Element `i` of a tile or fragment value, or the value itself for a scalar (it broadcasts). `within`: the
        tile type `i` runs over, when `v` broadcasts against it along dimensions of size 1."""
        if not _is_array(v.type):
            return self.name(v)
        if isinstance(within, TensorType) and isinstance(v.type, TensorType) and v.type.shape != within.shape:
            i = _broadcast_index(i, within.shape, v.type.shape)
        if v in self.inline:
            return self.inline[v](i)
        return f"{self.name(v)}[{i}]"

    def declare(self, v: Value, expr_of) -> None:
        """Declare `v`: `const T v = expr;` for a scalar, or an array filled elementwise by an unrolled loop."""
        t = v.type
        if not _is_array(t):
            self.line(f"const {self.ctype(t)} {self.name(v)} = {expr_of('')};")
            return
        n = _numel(t)
        self.line(f"{self.ctype(t)} {self.name(v)}[{n}];")
        self.unrolled(n, f"{self.name(v)}[irf_e] = {expr_of('irf_e')};")

    def unrolled(self, n: int, stmt: str, start: int = 0) -> None:
        self.line("#pragma unroll")
        self.line(f"for (int irf_e = {start}; irf_e < {n}; ++irf_e) {stmt}")

    def assign(self, dst: str, v: Value) -> None:
        """`dst = v` for a scalar, elementwise for arrays."""
        if _is_array(v.type):
            self.unrolled(_numel(v.type), f"{dst}[irf_e] = {self.name(v)}[irf_e];")
        else:
            self.line(f"{dst} = {self.name(v)};")

    def index(self, op, group: str, extra=None) -> list[str]:
        vals = op.index_operands
        names = [self.name(v) for v in vals]
        return [c_index(e, lambda i: names[i] if i < len(names) else extra[i - len(names)]) for e in op.exprs(group)]

    # ---- the kernel -------------------------------------------------------------------------------------------
    def emit(self) -> str:
        k = self.k
        a = k.attributes
        name = self.kernel_name()
        params = [self.param(arg) for arg in k.body.args]
        self.smem_declarations()
        frag_ops = [op for op in k.walk() if isinstance(op, (K.FragLoadOp, K.FragStoreOp, K.LdmatrixOp))]
        if frag_ops:
            self.line(f"const int irf_lane = {self.linear_tid} & 31;")
        elementwise = [op for op in frag_ops if not isinstance(op, K.LdmatrixOp)]
        if elementwise:
            self.line("const int irf_g = irf_lane >> 2, irf_t = irf_lane & 3;  // mma fragment layout coordinates")
        if any((op.frag if isinstance(op, K.FragStoreOp) else op.result).type.layout == "wgmma" for op in elementwise):
            self.line(f"const int irf_wg = ({self.linear_tid} >> 5) & 3;  // the warp in its warpgroup")
        self.ghost_declarations()
        self.ops(k.body.ops)
        origins = list(dict.fromkeys(o for o in (origin(op.loc) for op in k.walk()) if o))
        dims = lambda d: ", ".join(map(str, d))
        bounds = _launch_bounds(k, self.fragments)
        head = [
            f"// {name}: grid ({dims(a['grid'])}), block ({dims(a['block'])}), "
            f"{self.dynamic_smem} bytes of dynamic shared memory",
        ]
        if origins:
            head.append("// from: " + "; ".join(origins))
        head += [
            f'#include "{PRELUDE_NAME}"',
            "",
            f'extern "C" __global__ void {bounds}{self.cluster_dims()}{name}(',
        ]
        head += [f"    {p}{',' if i < len(params) - 1 else ') {'}" for i, p in enumerate(params)]
        if not params:
            head[-1] += ") {"
        return "\n".join([*head, *self.lines, "}"]) + "\n"

    def kernel_name(self) -> str:
        raw = self.k.attributes["sym_name"]
        n = re.sub(r"[^A-Za-z0-9_]", "_", raw)
        return n if n and not n[0].isdigit() else "k_" + n

    def param(self, arg: Value) -> str:
        t = arg.type
        n = self.name(arg)
        if isinstance(t, PtrType):
            const = "" if arg.index in self.written else "const "
            return f"{const}{self.ctype(t.dtype)}* __restrict__ {n}"
        return f"const __grid_constant__ irf_tensormap {n}"  # a !kernel.tensormap

    def ops(self, ops) -> None:
        for op in ops:
            o = origin(op.loc)
            if o is not None and o != self.last_origin:
                self.line(f"// {o}")
                self.last_origin = o
            method = getattr(self, "op_" + op.name.split(".", 1)[1], None)
            if method is None:
                if isinstance(op, K.ScalarMathOp):
                    self.scalar(op)
                    continue
                if isinstance(op, K.ShuffleOp):
                    self.shuffle(op)
                    continue
                raise op.error("has no CUDA emission")
            method(op)

    def region_body(self, block: Block, on_yield) -> None:
        """Emit a region's ops inside braces; `on_yield(yield_op)` emits what the terminator means."""
        self.depth += 1
        ops = block.ops
        y = ops[-1] if ops and isinstance(ops[-1], K.YieldOp) else None
        self.ops(ops[:-1] if y else ops)
        if y is not None:
            on_yield(y)
        self.depth -= 1

    # ---- geometry ---------------------------------------------------------------------------------------------
    def op_thread_id(self, op):
        self.line(f"const {self.index_t} {self.name(op.result)} = threadIdx.{op.attributes['dim']};")

    def op_block_id(self, op):
        self.line(f"const {self.index_t} {self.name(op.result)} = blockIdx.{op.attributes['dim']};")

    def op_block_dim(self, op):
        d = K.AXES.index(op.attributes["dim"])
        self.line(f"const {self.index_t} {self.name(op.result)} = {self.k.attributes['block'][d]};")

    def op_grid_dim(self, op):
        d = K.AXES.index(op.attributes["dim"])
        self.line(f"const {self.index_t} {self.name(op.result)} = {self.k.attributes['grid'][d]};")

    def op_lane_id(self, op):
        self.line(f"const {self.index_t} {self.name(op.result)} = {self.linear_tid} & 31;")

    def op_warp_id(self, op):
        self.line(f"const {self.index_t} {self.name(op.result)} = {self.linear_tid} >> 5;")

    def op_index(self, op):
        (e,) = self.index(op, "expr")
        self.line(f"const {self.index_t} {self.name(op.result)} = {e};")
