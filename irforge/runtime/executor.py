"""Run a cuda-level program on the GPU with torch tensors as buffers.

    ex = Executor(module)              # compiles every kernel (NVRTC, cached), allocates every buffer once
    y, = ex(x, w)                      # arguments in the program's argument order; results are torch tensors

Intermediates and outputs are allocated once, when the executor is built, and reused by every call: a result is
overwritten by the next call (clone it to keep it). Launches are pre-packed; a call only rebinds the pointers of its
arguments. With `use_graph=True` the launch sequence is captured once as a CUDA graph and replayed (arguments are
then copied into the graph's own input buffers; parameters only when their tensor changes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from irforge.diagnostics import error
from irforge.ir import Operation

from . import driver
from .nvrtc import compile_cuda

_TORCH_DTYPES = {
    "f64": "float64",
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "i64": "int64",
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
    "u8": "uint8",
    "bool": "bool",
}


def torch_dtype(scalar) -> object:
    import torch

    return getattr(torch, _TORCH_DTYPES[scalar.name])


def element_size(scalar) -> int:
    from irforge.dialects.kernel.types import element_bytes

    return element_bytes(scalar)


@dataclass
class _Binding:
    """Where a kernel argument slot gets its address: program argument `position`, or a fixed buffer."""

    launch: int
    slot: int
    position: int | None  # program argument, or None for a fixed buffer
    tensormap: object = None  # the !kernel.tensormap type, when the slot is a TMA descriptor


class Executor:
    """A compiled, allocated cuda-level program, callable with torch tensors."""

    def __init__(
        self,
        module: Operation,
        *,
        program: str | None = None,
        arch: str | None = None,
        use_graph: bool = False,
        sync_each: bool = False,
    ):
        from irforge.dialects.cuda.ops import AllocOp, CudaKernelOp, InputOp, LaunchOp, OutputOp, ParamOp, ProgramOp
        from irforge.dialects.cuda.ops import ViewOp as CudaViewOp

        try:
            import torch
        except ImportError:
            raise error("the GPU executor needs torch") from None
        if not driver.has_gpu() or not torch.cuda.is_available():
            raise error("the GPU executor needs a CUDA GPU and a torch build with CUDA")
        self._torch = torch
        driver.ensure_context()
        progs = [op for op in module.body.ops if isinstance(op, ProgramOp)]
        if program is not None:
            progs = [p for p in progs if p.attributes["sym_name"] == program]
        if len(progs) != 1:
            raise error(f"expected one cuda.program{f' named @{program}' if program else ''}, found {len(progs)}")
        self.program = progs[0]
        self.use_graph = use_graph
        self.sync_each = sync_each
        kernels = {op.attributes["sym_name"]: op for op in module.body.ops if isinstance(op, CudaKernelOp)}
        device = torch.device("cuda", torch.cuda.current_device())

        self.functions: dict[str, driver.Function] = {}
        self.arg_types: dict[int, object] = {}
        self.param_positions: set[int] = set()
        self.buffers: dict = {}  # program value -> torch tensor (allocations and views of them)
        self._sources: dict = {}  # program value -> argument position it aliases (arguments and their views)
        self._launches: list[tuple[driver.Function, driver.PackedArgs]] = []
        self._bindings: list[_Binding] = []
        self._outputs: list = []
        for op in self.program.body.ops:
            if isinstance(op, (InputOp, ParamOp)):
                pos = op.attributes["position"]
                self.arg_types[pos] = op.result.type
                self._sources[op.result] = pos
                if isinstance(op, ParamOp):
                    self.param_positions.add(pos)
            elif isinstance(op, AllocOp):
                t = op.result.type
                self.buffers[op.result] = torch.empty(t.shape, dtype=torch_dtype(t.dtype), device=device)
            elif isinstance(op, CudaViewOp):
                if op.source in self._sources:
                    self._sources[op.result] = self._sources[op.source]
                else:
                    self.buffers[op.result] = self.buffers[op.source].view(op.result.type.shape)
            elif isinstance(op, LaunchOp):
                self._plan_launch(op, kernels, arch)
            elif isinstance(op, OutputOp):
                self._outputs = list(op.values)
        self.num_args = len(self.arg_types)
        self._static_args: dict[int, object] = {}  # graph mode: the graph's own argument buffers
        self._param_seen: dict[int, int] = {}  # graph mode: data_ptr of the parameter last copied in
        self._graph = None
        self._tensormaps: dict = {}

    def _plan_launch(self, op, kernels, arch) -> None:
        from irforge.dialects.kernel.types import TensorMapType

        name = op.attributes["callee"].name
        k = kernels[name]
        fn = self.functions.get(name)
        if fn is None:
            cubin = compile_cuda(k.attributes["source"], name, arch=arch)
            mod = driver.Module(cubin.image, name)
            fn = mod.function(name, k.attributes["grid"], k.attributes["block"], k.attributes["smem"])
            self.functions[name] = fn
        values = []
        index = len(self._launches)
        for slot, (v, t) in enumerate(zip(op.args, k.attributes["params"])):
            pos = self._sources.get(v)
            is_map = isinstance(t, TensorMapType)
            if pos is not None:
                values.append(0)
                self._bindings.append(_Binding(index, slot, pos, t if is_map else None))
            elif is_map:
                buf = self.buffers[v]
                values.append(self._tensormap(t, buf.data_ptr()))
            else:
                values.append(int(self.buffers[v].data_ptr()))
        self._launches.append((fn, driver.PackedArgs(values)))

    def _tensormap(self, t, address: int) -> driver.TensorMap:
        key = (t, address)
        tm = self._tensormaps.get(key)
        if tm is None:
            tm = self._tensormaps[key] = driver.TensorMap(t.dtype.name, t.shape, t.box, address, element_size(t.dtype))
        return tm

    # ---- calls ------------------------------------------------------------------------------------------------
    def _check_args(self, args) -> list:
        torch = self._torch
        if len(args) != self.num_args:
            raise error(f"the program takes {self.num_args} argument(s), got {len(args)}")
        out = []
        for pos, a in enumerate(args):
            t = self.arg_types[pos]
            if isinstance(a, np.ndarray):
                a = torch.from_numpy(np.ascontiguousarray(a)).to(device="cuda", dtype=torch_dtype(t.dtype))
            if not isinstance(a, torch.Tensor):
                raise error(f"argument #{pos} must be a torch tensor or numpy array, got {type(a).__name__}")
            if tuple(a.shape) != t.shape or a.dtype != torch_dtype(t.dtype):
                raise error(f"argument #{pos} is {a.dtype}{list(a.shape)}, the program takes {t}")
            if not a.is_cuda or not a.is_contiguous():
                raise error(f"argument #{pos} must be a contiguous CUDA tensor")
            out.append(a)
        return out

    def _bind(self, tensors) -> None:
        for b in self._bindings:
            ptr = tensors[b.position].data_ptr()
            packed = self._launches[b.launch][1]
            if b.tensormap is not None:
                packed.set_tensormap(b.slot, self._tensormap(b.tensormap, ptr))
            else:
                packed.set_pointer(b.slot, ptr)

    def _launch_all(self, *, capturing: bool = False) -> None:
        stream = driver.current_stream()
        for fn, packed in self._launches:
            fn.launch(packed, stream)
            if self.sync_each and not capturing:
                try:
                    driver.synchronize()
                except driver.CudaError as e:
                    raise driver.CudaError(f"kernel {fn.name} failed: {e}") from None

    def _results(self, tensors) -> list:
        outs = []
        for v in self._outputs:
            if v in self._sources:
                outs.append(tensors[self._sources[v]].view(v.type.shape))
            else:
                outs.append(self.buffers[v])
        return outs

    def __call__(self, *args) -> list:
        tensors = self._check_args(args)
        if not self.use_graph:
            self._bind(tensors)
            self._launch_all()
            return self._results(tensors)
        return self._replay(tensors)

    def _replay(self, tensors) -> list:
        torch = self._torch
        if not self._static_args:
            self._static_args = {pos: torch.empty_like(t) for pos, t in enumerate(tensors)}
        static = self._static_args
        for pos, t in enumerate(tensors):
            if pos in self.param_positions and self._param_seen.get(pos) == t.data_ptr():
                continue
            static[pos].copy_(t)
            if pos in self.param_positions:
                self._param_seen[pos] = t.data_ptr()
        if self._graph is None:
            statics = [static[p] for p in range(self.num_args)]
            self._bind(statics)
            self._launch_all()  # once outside capture: launch errors surface here, not inside the graph
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._launch_all(capturing=True)
            self._graph = graph
        self._graph.replay()
        return self._results([static[p] for p in range(self.num_args)])

    def resources(self) -> dict[str, dict[str, int]]:
        """Per kernel: registers, local-memory bytes (spills), static shared memory."""
        return {name: fn.resources() for name, fn in self.functions.items()}


def run_program(module: Operation, *args, **kw) -> list:
    """Build an executor and call it once."""
    return Executor(module, **kw)(*args)
