"""kernel-to-cuda's statements for memory: shared buffers declared at the kernel's top, loads, stores and
atomics (one vector access per contiguous run), barriers and fences, dependent-launch control, warp shuffles, and
the asynchronous copies (cp.async, mbarriers, TMA)."""

from __future__ import annotations

from irforge.dialects.kernel import cluster as CL
from irforge.dialects.kernel import ops as K
from irforge.dialects.kernel.types import MbarrierType, PtrType, SmemType, element_type

from irforge import index_expr as ix
from irforge.ir import Block, Operation, Value
from irforge.target import target
from irforge.types import TensorType

from .c_text import _is_array, _numel, c_index, smem_offset_text

_SHFL = {"xor": "__shfl_xor_sync", "down": "__shfl_down_sync", "up": "__shfl_up_sync", "idx": "__shfl_sync"}


def _needs_sm90(op: Operation) -> None:
    if target().sm < 90:
        raise op.error(f"needs sm_90 or later (programmatic dependent launch), and the target is {target().arch}")


def _loop_depth(v: Value) -> int:
    """How many `kernel.for` loops enclose the definition of `v` (a loop's index counts its own)."""
    block = v.owner if isinstance(v.owner, Block) else v.owner.parent
    depth = 0
    while block is not None and (op := block.parent_op) is not None:
        depth += isinstance(op, K.ForOp)
        block = op.parent
    return depth


class MemoryStatements:
    """Mixed into the kernel emitter (it supplies `k`, `line`, `name`, `ctype`, `elem`, `declare`, `index`,
    `depth`)."""

    # ---- memory -----------------------------------------------------------------------------------------------
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
