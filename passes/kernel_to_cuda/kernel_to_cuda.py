"""kernel -> cuda: the one CUDA emitter, for every kernel kind.

Each `kernel.func` becomes a `cuda.kernel` holding readable CUDA C++: one statement per kernel op, SSA names kept,
register tiles and fragments as small arrays filled by `#pragma unroll` loops (unrolled here, in the text, never in
the IR), comments naming the torch ops the statements came from (from the ops' locations). f16/bf16 values are
stored as `__half`/`__nv_bfloat16` and computed in float, rounding once per op as the simulator does. The host
`func.func` becomes a `cuda.program`: its arguments become `cuda.input`s; params, allocations, views and launches
carry over in order.
"""

from __future__ import annotations

import re

from irforge.dialects.cuda import ops as C
from irforge.dialects.cuda.prelude import C_TYPES, HALF_TYPES, PRELUDE_NAME
from irforge.dialects.kernel import cluster as CL
from irforge.dialects.kernel import dependent_launch as DL
from irforge.dialects.kernel import fragments
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel import warpgroup as WG
from irforge.dialects.kernel.types import (
    FragType,
    MbarrierType,
    PtrType,
    SmemType,
    element_type,
)

from irforge import index_expr as ix
from irforge.attributes import SymbolRef
from irforge.builtin import FuncOp, ReturnOp
from irforge.ir import Block, Operation, Region, Value
from irforge.location import FusedLoc, Location, NameLoc
from irforge.pass_manager import Pass
from irforge.scalar_ops import SCALAR_OPS
from irforge.target import target
from irforge.types import ScalarType, TensorType

from .cluster import ClusterStatements
from .warpgroup import WarpgroupStatements

_MONOID_C = {"add": "({a} + {b})", "mul": "({a} * {b})", "max": "irf_maximum({a}, {b})", "min": "irf_minimum({a}, {b})"}
_SHFL = {"xor": "__shfl_xor_sync", "down": "__shfl_down_sync", "up": "__shfl_up_sync", "idx": "__shfl_sync"}
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


def _needs_sm90(op: Operation) -> None:
    if target().sm < 90:
        raise op.error(f"needs sm_90 or later (programmatic dependent launch), and the target is {target().arch}")


def origin(loc: Location) -> str | None:
    """The torch-level origin of an op, from its location: named origins ("aten.mul"), with their source line."""
    if isinstance(loc, NameLoc):
        flc = loc.child.file_line_col()
        return loc.name + (f" ({flc.file}:{flc.line})" if flc is not None else "")
    if isinstance(loc, FusedLoc):
        parts = [o for o in (origin(x) for x in loc.locs) if o]
        return ", ".join(dict.fromkeys(parts)) or None
    return None


def c_type(t: ScalarType, index_t: str) -> str:
    return index_t if t.name == "index" else C_TYPES[t.name]


def _literal(v, t: ScalarType, index_t: str) -> str:
    import numpy as np

    name = t.name
    if name == "bool":
        return "true" if v else "false"
    if not t.is_float:
        return f"{int(v)}LL" if name == "i64" or (name == "index" and index_t == "long long") else str(int(v))
    f = float(v)
    if name == "f64":
        if np.isnan(f) or np.isinf(f):
            bits = np.array([f]).view(np.uint64)[0]
            return f"__longlong_as_double(0x{int(bits):016x}LL)"
        return repr(f)
    if np.isnan(f) or np.isinf(f):
        bits = np.array([f], dtype=np.float32).view(np.uint32)[0]
        lit = f"__int_as_float(0x{int(bits):08x})"
    else:
        text = str(np.float32(f))
        lit = (text if any(c in text for c in ".en") else text + ".0") + "f"
    return lit if name == "f32" else f"{HALF_TYPES[C_TYPES[name]][1]}({lit})"


def _loop_depth(v: Value) -> int:
    """How many `kernel.for` loops enclose the definition of `v` (a loop's index counts its own)."""
    block = v.owner if isinstance(v.owner, Block) else v.owner.parent
    depth = 0
    while block is not None and (op := block.parent_op) is not None:
        depth += isinstance(op, K.ForOp)
        block = op.parent
    return depth


def c_index(e: ix.IndexExpr, leaf) -> str:
    """An index expression in C (operands are non-negative, so `/` and `%` agree with floordiv and mod)."""
    if isinstance(e, ix.Const):
        return str(e.value) if e.value >= 0 else f"({e.value})"
    if isinstance(e, ix.Dim):
        return leaf(e.index)
    lhs, rhs = c_index(e.lhs, leaf), c_index(e.rhs, leaf)
    if isinstance(e, ix.Min):
        return f"min({lhs}, {rhs})"
    if isinstance(e, ix.Max):
        return f"max({lhs}, {rhs})"
    if isinstance(e, ix.CeilDiv):
        return f"(({lhs} + {rhs} - 1) / {rhs})"
    if e.lhs.prec < e.prec and not isinstance(e.lhs, ix.CeilDiv):
        lhs = f"({lhs})"
    if e.rhs.prec <= e.prec and not isinstance(e.rhs, (ix.Min, ix.Max, ix.CeilDiv)):
        rhs = f"({rhs})"
    sym = {ix.Add: "+", ix.Sub: "-", ix.Mul: "*", ix.FloorDiv: "/", ix.Mod: "%"}[type(e)]
    return f"{lhs} {sym} {rhs}"


def smem_offset_text(exprs, t: SmemType, leaf, offset: int = 0, scale: int = 1) -> str:
    """C text of the (swizzled) element offset `offset` past the point `exprs` (one per dimension of `t`, or fewer:
    the leading ones) of shared buffer `t`, times `scale` (the element's bytes for an address: distributed over the
    terms, so that constant parts stay one immediate); `leaf(i)` names dimension i of the expressions."""
    lin = ix.Const(offset)
    for e, s in zip(exprs, t.strides):
        lin = lin + e * s
    if not t.swizzle:
        return c_index(ix.scaled(lin, scale), leaf)
    b, m, s = t.swizzle
    rows_of_columns = offset == 0 and len(exprs) == len(t.shape) and t.shape[-1] <= 1 << (m + s)
    if rows_of_columns and all(st % (1 << (m + s)) == 0 for st in t.strides[:-1]):
        # Rows of at most 2^(M+S) elements: the swizzle XORs a row's bits into its column, o = r + c goes to
        # r + (c ^ f(r)); the row part r stays outside (its constants immediates) and f(r) is the lane's, the same
        # for every column it reads.
        row = ix.Const(0)
        for e, st in zip(exprs[:-1], t.strides[:-1]):
            row = row + e * st
        flip = f"irf_swizzle_row<{b}, {m}, {s}>({c_index(row, leaf)})"
        moved = f"(({c_index(exprs[-1], leaf)}) ^ {flip})"
        moved = moved if scale == 1 else f"{scale} * {moved}"
        row_text = c_index(ix.scaled(row, scale), leaf)
        return moved if row_text == "0" else f"{row_text} + {moved}"
    text = f"irf_swizzle<{b}, {m}, {s}>({c_index(lin, leaf)})"
    return text if scale == 1 else f"{scale} * {text}"


def _numel(t) -> int:
    if isinstance(t, TensorType):
        return t.numel
    if isinstance(t, FragType):
        return t.per_lane
    return 1


# A thread carrying a register tile this large (a SIMT contraction's 8 x 8 accumulators), or computing on tensor-core
# fragments, is told one block a multiprocessor suffices: ptxas otherwise holds such a kernel under a register
# target of its own for occupancy the schedule does not plan on, and spills (a 32 x 32 x 64 f32 product: 168
# registers and 36 spill stores under a bare bound; a 32 x 128 x 2048 f16 split-K product on mma: 72 and 4).
REGISTER_TILE_ELEMENTS = 64


def _registers(t) -> int:
    """32-bit registers a value of type `t` takes (two f16/bf16 elements share one)."""
    if isinstance(t, TensorType):
        return max(1, t.numel * t.dtype.bits // 32)
    return _numel(t)


def _full_occupancy_registers(threads: int) -> int:
    """Registers a thread has when a multiprocessor holds as many blocks of `threads` as its thread and block
    limits allow (32 for 64 to 1024 threads)."""
    t = target()
    lanes = -(-threads // t.warp_size) * t.warp_size
    blocks = min(t.max_blocks_per_sm, t.max_threads_per_sm // lanes)
    return min(t.max_registers_per_thread, t.registers_per_sm // (blocks * lanes))


def _launch_bounds(k, fragments: bool) -> str:
    """The kernel's `__launch_bounds__(...)` attribute, or none.

    `(threads, 1)`, one block a multiprocessor, where a thread carries a register tile of REGISTER_TILE_ELEMENTS or
    more, holds tensor-core fragments (`fragments`) or sets its warpgroups' register counts. Else a bare
    `(threads)`: ptxas picks a register target for occupancy (memory-bound kernels keep its choice). Except where a
    loop's carries and one step's loads take more than half a thread's registers at full occupancy (the rest goes to
    addresses and indices): that thread cannot run at full occupancy, and ptxas' target lands a step below what the
    loop holds and spills (f32 (x [2, 7, 100] * 0.5) @ wᵀ [2, 512, 100] + r: 224 threads carrying 4 accumulators,
    loading 20 values a step: 56 registers, 8 bytes spilled). A minimum of blocks spills there too (ptxas fills the
    registers it is given, unrolling: 80 and 128 registers spilled). No bound: ptxas takes what the loop needs (60).
    Only for blocks of up to 256 threads, whose threads' most registers fit the register file: the bound says
    nothing else there."""
    t = target()
    one_block, unbounded = fragments, False
    for op in k.walk():
        if one_block:
            break
        if isinstance(op, WG.SetMaxRegistersOp):  # the counts split one block's register file
            one_block = True
        elif isinstance(op, K.ForOp) and op.carries:
            one_block = any(
                isinstance(c.type, TensorType) and _numel(c.type) >= REGISTER_TILE_ELEMENTS for c in op.carries
            )
            held = sum(_registers(c.type) for c in op.carries)
            held += sum(_registers(o.result.type) for o in op.walk() if isinstance(o, K.LoadOp))
            unbounded |= 2 * held > _full_occupancy_registers(k.threads)
    if one_block:
        return f"__launch_bounds__({k.threads}, 1) "
    lanes = -(-k.threads // t.warp_size) * t.warp_size
    if unbounded and lanes * t.max_registers_per_thread <= t.registers_per_sm:
        return ""
    return f"__launch_bounds__({k.threads}) "


def _holds_fragments(k) -> bool:
    """Whether the kernel computes on tensor-core fragments."""
    return any(isinstance(r.type, FragType) for op in k.walk() for r in op.results)


def _chained(op) -> bool:
    """Whether an elementwise math op of a tensor-core kernel's epilogue (outside every loop: at the kernel's top
    level or in a warp-specialized consumer's branch) has a tile read by one elementwise op of the same shape (math
    or a cast), element by element: it can be computed inside that op's element instead of into an array of its own
    (a user it broadcasts to would compute it again for each of its elements). A consumer's 128-register accumulator
    and a SiLU's 128 sigmoids as arrays spilled 324 bytes at 232 registers; chained, none. Inside loops the arrays
    stay: ptxas scheduled inlined chains worse in a SIMT attention's loops (2564 spill stores where the arrays had
    none)."""
    users = op.result.users
    return (
        not any(isinstance(p, K.ForOp) for p in op.ancestors())
        and len(op.result.uses) == 1
        and isinstance(users[0], (K.ScalarMathOp, K.CastOp))
        and users[0].parent is op.parent
        and isinstance(op.result.type, TensorType)
        and users[0].results[0].type.shape == op.result.type.shape
    )


def _is_array(t) -> bool:
    return isinstance(t, (TensorType, FragType))


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


class _Emitter(WarpgroupStatements, ClusterStatements):
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

    def smem_declarations(self) -> None:
        # Buffers that cp.async writes or ldmatrix reads take 32-bit shared addresses (`{name}_addr`): NVRTC keeps a
        # generic pointer's offsets in 64 bits (nvcc narrows them), which costs F3's attention kernel 9 registers
        # and a tenth of its loop's instructions.
        addressed = {
            op.dst if isinstance(op, K.CpAsyncOp) else op.mem
            for op in self.k.walk()
            if isinstance(op, (K.CpAsyncOp, K.LdmatrixOp, CL.StoreAsyncOp))
        }
        static, offset = 0, 0
        for op in self.k.body.ops:
            if not isinstance(op, K.SmemOp):
                continue
            t, n = op.result.type, self.name(op.result)
            if isinstance(t, MbarrierType):
                ct, count, nbytes = "unsigned long long", t.count, t.nbytes
            else:
                ct, count, nbytes = self.ctype(t.dtype), t.numel, t.nbytes
            what = f"mbarrier[{t.count}]" if isinstance(t, MbarrierType) else f"{t.dtype}{list(t.shape)}"
            align = 128 if isinstance(t, MbarrierType) else t.align
            if "dynamic" in op.attributes:
                if offset == 0:
                    self.line("extern __shared__ __align__(1024) unsigned char irf_dynamic_smem[];")
                offset = -(-offset // align) * align
                self.line(f"{ct}* const {n} = reinterpret_cast<{ct}*>(irf_dynamic_smem + {offset});  // {what}")
                offset += -(-nbytes // 128) * 128
            else:
                self.line(f"__shared__ __align__({align}) {ct} {n}[{count}];  // {what}")
                static += nbytes
            if op.result in addressed:
                self.line(f"const unsigned {n}_addr = irf_smem_addr({n});")
        limit = target().smem_static
        if static > limit:
            raise self.k.error(
                f"declares {static} bytes of static shared memory, over the {limit}-byte limit;"
                " mark the largest buffers `dynamic`"
            )
        self.dynamic_smem = offset

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

    # ---- values -----------------------------------------------------------------------------------------------
    def op_const(self, op):
        v, t = op.attributes["value"], op.result.type
        if isinstance(v, tuple):
            items = ", ".join(_literal(x, element_type(t), self.index_t) for x in v)
            self.line(f"const {self.ctype(t)} {self.name(op.result)}[{len(v)}] = {{{items}}};")
            return
        lit = _literal(v, element_type(t), self.index_t)
        self.declare(op.result, lambda i: lit)

    def scalar(self, op):
        name = op.scalar_op
        o = SCALAR_OPS[name]
        types = [element_type(v.type) for v in op.operands]
        half = any(t.name in ("f16", "bf16") for t in types)
        rt = element_type(op.result.type)

        def expr(i):
            args = [self.elem(v, i, op.result.type) for v in op.operands]
            if name == "select":
                return f"({args[0]} ? {args[1]} : {args[2]})"
            if not o.infix:
                return f"irf_{name}({', '.join(args)})"
            if half:  # f32 math, one rounding (the prelude's irf_ functions do the same for halves)
                args = [f"irf_f32({a})" for a in args]
                e = f"({args[0]} {o.cuda} {args[1]})"
                return f"{HALF_TYPES[C_TYPES[rt.name]][1]}({e})" if rt.name in ("f16", "bf16") else e
            return f"({args[0]} {o.cuda} {args[1]})"

        users = op.result.users
        if len(op.result.uses) == 1 and isinstance(users[0], K.ReduceOp) and users[0].init:
            self.inline[op.result] = expr  # folded element by element into an accumulator: no array of its own
            return
        if _is_array(op.result.type) and self.fragments and _chained(op):
            self.inline[op.result] = expr  # an epilogue's chain: one loop, no array between its ops
            return
        self.declare(op.result, expr)

    def op_cast(self, op):
        src, dst = element_type(op.input.type), element_type(op.result.type)
        self.declare(op.result, lambda i: self.convert(self.elem(op.input, i), src, dst))

    def convert(self, x: str, src: ScalarType, dst: ScalarType) -> str:
        return x if src == dst else f"irf_cast<{c_type(dst, self.index_t)}>({x})"

    def op_splat(self, op):
        self.declare(op.result, lambda i: self.elem(op.input, i, op.result.type))

    def op_reshape(self, op):
        t = op.result.type
        self.line(f"const {self.ctype(t)} (&{self.name(op.result)})[{_numel(t)}] = {self.name(op.input)};")

    def op_extract(self, op):
        import numpy as np

        t = op.tile.type
        shape = t.shape if isinstance(t, TensorType) else (t.per_lane,)
        flat = int(np.ravel_multi_index(op.attributes["position"], shape))
        self.line(f"const {self.ctype(op.result.type)} {self.name(op.result)} = {self.name(op.tile)}[{flat}];")

    def op_insert(self, op):
        import numpy as np

        t = op.tile.type
        shape = t.shape if isinstance(t, TensorType) else (t.per_lane,)
        flat = int(np.ravel_multi_index(op.attributes["position"], shape))
        self.declare(op.result, lambda i: self.elem(op.tile, i))
        self.line(f"{self.name(op.result)}[{flat}] = {self.name(op.element)};")

    def op_reduce(self, op):
        import numpy as np

        t = op.input.type
        et = t.dtype
        half = et.name in ("f16", "bf16")
        acc_t = "float" if half else self.ctype(et)
        comb = _MONOID_C[op.attributes["kind"]]
        inline = self.inline.get(op.input)
        if inline is not None:
            get = (lambda i: f"irf_f32({inline(str(i))})") if half else (lambda i: inline(str(i)))
        else:
            src = self.name(op.input)
            get = (lambda i: f"irf_f32({src}[{i}])") if half else (lambda i: f"{src}[{i}]")
        axes = tuple(op.attributes["axes"])
        kept = [i for i in range(t.rank) if i not in axes]
        out_shape = [t.shape[i] for i in kept]
        groups = {}
        for flat, pos in enumerate(np.ndindex(*t.shape)):
            key = tuple(pos[i] for i in kept)
            groups.setdefault(key, []).append(flat)
        res = self.name(op.result)
        to = (lambda x: f"{HALF_TYPES[C_TYPES[et.name]][1]}({x})") if half else (lambda x: x)
        if op.init:  # folded into the accumulator one element after another (a chain of fused multiply-adds)
            acc = op.init[0]
            outs = list(groups.values())
            if out_shape:
                self.line(f"{self.ctype(et)} {res}[{len(outs)}];")
            for o_flat, members in enumerate(outs):
                e = self.elem(acc, str(o_flat))
                for m in members:  # halves round after every step, as the simulator does
                    e = to(comb.format(a=f"irf_f32({e})" if half else e, b=get(m)))
                out = f"{res}[{o_flat}]" if out_shape else f"const {self.ctype(et)} {res}"
                self.line(f"{out} = {e};")
            return
        if not out_shape and t.numel > TREE_REDUCE_MAX:  # a long tile to one value: an unrolled loop over it
            self.line(f"{acc_t} {res}_acc = {get(0)};")
            self.unrolled(t.numel, f"{res}_acc = {comb.format(a=f'{res}_acc', b=get('irf_e'))};", start=1)
            self.line(f"const {self.ctype(et)} {res} = {to(f'{res}_acc')};")
            return
        if not out_shape:
            self.line(f"const {self.ctype(et)} {res} = {to(_tree(comb, [get(i) for i in range(t.numel)]))};")
            return
        self.line(f"{self.ctype(et)} {res}[{int(np.prod(out_shape))}];")
        for o_flat, (_, members) in enumerate(groups.items()):
            self.line(f"{res}[{o_flat}] = {to(_tree(comb, [get(m) for m in members]))};")

    # ---- control flow -----------------------------------------------------------------------------------------
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

    # ---- memory -----------------------------------------------------------------------------------------------
    def op_smem(self, op):
        pass  # declared at the top of the kernel

    def smem_address(self, mem: Value, byte_offset: str) -> str:
        """The 32-bit shared address `byte_offset` bytes into `mem` (declared by `smem_declarations`)."""
        base = f"{self.name(mem)}_addr"
        return base if byte_offset == "0" else f"{base} + {byte_offset}"

    def address(self, op, group: str, mem: Value, offset: int = 0) -> str:
        """`&mem[...]`-style pointer expression for an access at `mem[group]`, `offset` elements further (before a
        swizzle)."""
        t = mem.type
        if isinstance(t, PtrType):
            (idx,) = op.exprs(group)
            names = [self.name(v) for v in op.index_operands]
            depth = [_loop_depth(v) for v in op.index_operands]
            rank = lambda atom: max((depth[d] for d in atom.dims()), default=-1)
            parts = ix.split_terms(idx + offset if offset else idx, rank)
            return " + ".join([self.name(mem), *(c_index(p, lambda i: names[i]) for p in parts)])
        off = self.smem_offset(op.exprs(group), op.index_operands, t, offset=offset)
        return f"{self.name(mem)} + {off}" if off != "0" else self.name(mem)

    def smem_offset(self, exprs, operands, t: SmemType, extra=None, offset: int = 0, scale: int = 1) -> str:
        names = [self.name(v) for v in operands]
        leaf = lambda i: names[i] if i < len(names) else extra[i - len(names)]
        return smem_offset_text(exprs, t, leaf, offset, scale)

    def runs(self, op, t: TensorType):
        """(run, [(address, tile positions)]) of a tile access: one vector access per run of contiguous elements.
        Under `xor_runs`, the first element's swizzled offset XOR each run's swizzled offset (one swizzle)."""
        strides = op.attributes.get("strides") or K.default_strides(t.shape)
        run, runs = K.access_runs(t, strides, op.attributes.get("vector"))
        if not op.attributes.get("xor_runs"):
            return run, [(self.address(op, "index", op.mem, offset), pos) for offset, pos in runs]
        b, m, s = op.mem.type.swizzle
        base = self.smem_offset(op.exprs("index"), op.index_operands, op.mem.type)
        mem = self.name(op.mem)
        moved = [(c ^ (((c >> (m + s)) & ((1 << b) - 1)) << m), pos) for c, pos in runs]
        return run, [(f"{mem} + ({base} ^ {c})" if c else f"{mem} + {base}", pos) for c, pos in moved]

    def op_load(self, op):
        r, t = op.result, op.result.type
        if not _is_array(t):
            self.line(f"const {self.ctype(t)} {self.name(r)} = *({self.address(op, 'index', op.mem)});")
            return
        n = self.name(r)
        self.line(f"{self.ctype(t)} {n}[{_numel(t)}];")
        run, parts = self.runs(op, t)
        if len(parts) == 1 and parts[0][1] == list(range(_numel(t))):
            self.line(f"irf_load({n}, {parts[0][0]});")
            return
        for ptr, pos in parts:
            if pos == list(range(pos[0], pos[0] + run)):
                self.line(f"irf_load_n<{run}>({n} + {pos[0]}, {ptr});")
            else:  # a run along an outer dimension: its elements are strided in the tile
                self.line(f"{{ {self.ctype(t)} irf_run[{run}]; irf_load_n<{run}>(irf_run, {ptr});")
                self.line("  " + " ".join(f"{n}[{p}] = irf_run[{j}];" for j, p in enumerate(pos)) + " }")

    def op_store(self, op):
        v, t = op.value, op.value.type
        if not _is_array(t):
            self.line(f"*({self.address(op, 'index', op.mem)}) = {self.name(v)};")
            return
        n = self.name(v)
        run, parts = self.runs(op, t)
        if len(parts) == 1 and parts[0][1] == list(range(_numel(t))):
            self.line(f"irf_store({parts[0][0]}, {n});")
            return
        for ptr, pos in parts:
            if pos == list(range(pos[0], pos[0] + run)):
                self.line(f"irf_store_n<{run}>({ptr}, {n} + {pos[0]});")
            else:
                elems = ", ".join(f"{n}[{p}]" for p in pos)
                self.line(f"{{ const {self.ctype(t)} irf_run[{run}] = {{{elems}}};")
                self.line(f"  irf_store_n<{run}>({ptr}, irf_run); }}")

    def op_atomic(self, op):
        kind, v, t = op.attributes["kind"], op.value, op.value.type
        if not _is_array(t):
            self.line(f"irf_atomic_{kind}({self.address(op, 'index', op.mem)}, {self.name(v)});")
            return
        strides = op.attributes.get("strides") or K.default_strides(t.shape)
        for k, offset in enumerate(K.tile_offsets(t.shape, strides)):
            self.line(f"irf_atomic_{kind}({self.address(op, 'index', op.mem, offset)}, {self.name(v)}[{k}]);")

    def op_barrier(self, op):
        self.line("__syncthreads();")

    def op_fence_proxy_async(self, op):
        self.line("irf_fence_proxy_async();")

    def op_griddepcontrol_wait(self, op):
        _needs_sm90(op)
        self.line("irf_griddep_wait();")

    def op_griddepcontrol_launch_dependents(self, op):
        _needs_sm90(op)
        self.line("irf_griddep_launch_dependents();")

    def op_prefetch_l2(self, op):
        _needs_sm90(op)
        (n,) = op.exprs("bytes")
        names = [self.name(v) for v in op.index_operands]
        self.line(f"irf_prefetch_l2({self.address(op, 'index', op.mem)}, {c_index(n, lambda i: names[i])});")

    def shuffle(self, op):
        (lane,) = self.index(op, "lane")
        width = op.attributes.get("width", 32)
        fn = _SHFL[op.mode]
        et = element_type(op.value.type)

        def expr(i):
            v = self.elem(op.value, i)
            if et.name == "bool":  # no bool overload: shuffle it as an int
                return f"({fn}(0xffffffffu, (int){v}, {lane}, {width}) != 0)"
            return f"{fn}(0xffffffffu, {v}, {lane}, {width})"

        self.declare(op.result, expr)

    # ---- asynchronous copies, mbarriers, TMA ------------------------------------------------------------------
    def op_cp_async(self, op):
        chunk = op.attributes["chunk"]
        nbytes = chunk.numel * chunk.dtype.bytes
        t = op.dst.type
        at = self.smem_offset(op.exprs("dst_index"), op.index_operands, t, scale=t.dtype.bytes)
        dst = self.smem_address(op.dst, at)
        src = self.address(op, "src_index", op.src)
        self.line(f"irf_cp_async<{nbytes}>({dst}, {src});")

    def op_cp_async_commit(self, op):
        self.line("irf_cp_async_commit();")

    def op_cp_async_wait(self, op):
        self.line(f"irf_cp_async_wait<{op.attributes['pending']}>();")

    def bar(self, op, group: str = "index") -> str:
        (i,) = self.index(op, group)
        return f"{self.name(op.bar)} + {i}" if i != "0" else self.name(op.bar)

    def op_mbarrier_init(self, op):
        self.line(f"irf_mbarrier_init({self.bar(op)}, {op.attributes['count']});")

    def op_mbarrier_arrive(self, op):
        if "expect_tx" in op.attributes:
            self.line(f"irf_mbarrier_arrive_expect_tx({self.bar(op)}, {op.attributes['expect_tx']});")
        else:
            self.line(f"irf_mbarrier_arrive({self.bar(op)});")

    def op_mbarrier_wait(self, op):
        (parity,) = self.index(op, "parity")
        self.line(f"irf_mbarrier_wait({self.bar(op)}, (unsigned)({parity}) & 1u);")

    def op_tma_load(self, op):
        coords = self.index(op, "coords")
        k = len(op.exprs("dst_index"))
        t = op.dst.type
        if k:
            off = self.smem_offset(op.exprs("dst_index"), op.index_operands, t)  # the leading dimensions' strides
            dst = f"{self.name(op.dst)} + {off}" if off != "0" else self.name(op.dst)
        else:
            dst = self.name(op.dst)
        inner_first = ", ".join(f"(int)({c})" for c in reversed(coords))
        self.line("{")
        self.depth += 1
        self.line(f"const int irf_coords[{len(coords)}] = {{{inner_first}}};  // innermost first")
        self.line(f"irf_tma_load({dst}, &{self.name(op.tmap)}, {self.bar(op, 'bar_index')}, irf_coords);")
        self.depth -= 1
        self.line("}")

    # ---- tensor cores -----------------------------------------------------------------------------------------
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


# A register tile of at most this many elements reduces as a balanced tree of its monoid's op: log2(n) dependent
# steps where a chain takes n - 1 (a decode step's row max and sum over a lane's scores: 4 steps, not 15).
TREE_REDUCE_MAX = 64


def _tree(comb: str, items: list[str]) -> str:
    """`comb` (a format with `a` and `b`) over `items` as a balanced tree: halves combined pairwise."""
    if len(items) == 1:
        return items[0]
    mid = len(items) // 2
    return comb.format(a=_tree(comb, items[:mid]), b=_tree(comb, items[mid:]))


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
