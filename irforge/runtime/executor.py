"""Run a cuda-level program on the GPU with torch tensors as buffers.

    ex = Executor(module, params={"norm.weight": w})   # compiles every kernel (NVRTC, cached), allocates once
    y, = ex(x)                                         # inputs in the program's order; results are torch tensors

Intermediates and outputs are allocated once, when the executor is built (filled with NaN until written, so an
unwritten output shows), and reused by every call: a result is overwritten by the next call (clone it to keep it).
Params are bound by name and used in place when they are contiguous CUDA tensors of the right type (copied to the
GPU otherwise). State (`cuda.state`: a KV cache) is memory that outlives a call: the kernels update it in place.
The executor allocates each state zero-filled, or uses the tensor `set_state` binds, so several programs (a
prefill and a decode step) share one cache; `ex.state[name]` is the state's tensor. Launches are pre-packed; a
call only rewrites pointer slots. With `use_graph=True` the launch sequence is captured once as a CUDA graph and
replayed; inputs are then copied into the graph's own buffers (state and params are not: they stay where they are).
"""

from __future__ import annotations

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


class Executor:
    """A compiled, allocated cuda-level program, callable with torch tensors (or numpy arrays)."""

    def __init__(
        self,
        module: Operation,
        *,
        params=None,
        program: str | None = None,
        arch: str | None = None,
        use_graph: bool = False,
        sync_each: bool = False,
        poison: bool = True,
    ):
        from irforge.dialects.cuda import ops as C

        try:
            import torch
        except ImportError:
            raise error("the GPU executor needs torch") from None
        if not driver.has_gpu() or not torch.cuda.is_available():
            raise error("the GPU executor needs a CUDA GPU and a torch build with CUDA")
        self._torch = torch
        driver.ensure_context()
        progs = [op for op in module.body.ops if isinstance(op, C.ProgramOp)]
        if program is not None:
            progs = [p for p in progs if p.attributes["sym_name"] == program]
        if len(progs) != 1:
            raise error(f"expected one cuda.program{f' named @{program}' if program else ''}, found {len(progs)}")
        self.program = progs[0]
        self.use_graph = use_graph
        self.sync_each = sync_each
        self.device = torch.device("cuda", torch.cuda.current_device())
        self._device_index = self.device.index
        kernels = {op.attributes["sym_name"]: op for op in module.body.ops if isinstance(op, C.CudaKernelOp)}

        self.functions: dict[str, driver.Function] = {}
        self.input_types: dict[int, object] = {}
        self.param_types: dict[str, object] = {}
        self.state_types: dict[str, object] = {}
        self.state: dict[str, object] = {}  # name -> the state's tensor, updated in place by every call
        # Where each program value's memory comes from: ("input", position), ("param", name) or ("alloc", tensor).
        self._source: dict = {}
        self._launches: list[tuple[driver.Function, driver.PackedArgs, list]] = []
        self._outputs: list = []
        for op in self.program.body.ops:
            if isinstance(op, C.InputOp):
                self.input_types[op.attributes["position"]] = op.result.type
                self._source[op.result] = ("input", op.attributes["position"])
            elif isinstance(op, C.ParamOp):
                self.param_types[op.attributes["sym"].name] = op.result.type
                self._source[op.result] = ("param", op.attributes["sym"].name)
            elif isinstance(op, C.StateOp):
                t, name = op.result.type, op.attributes["sym"].name
                self.state_types[name] = t
                self.state[name] = torch.zeros(t.shape, dtype=torch_dtype(t.dtype), device=self.device)
                self._source[op.result] = ("state", name)
            elif isinstance(op, C.AllocOp):
                t = op.result.type
                buf = torch.empty(t.shape, dtype=torch_dtype(t.dtype), device=self.device)
                if poison:
                    buf.fill_(float("nan") if t.dtype.is_float else 0x5A if t.dtype.name != "bool" else True)
                self._source[op.result] = ("alloc", buf)
            elif isinstance(op, C.ViewOp):
                self._source[op.result] = self._source[op.source]
            elif isinstance(op, C.LaunchOp):
                self._plan_launch(op, kernels[op.attributes["callee"].name], arch)
            elif isinstance(op, C.OutputOp):
                self._outputs = list(op.values)
        self._params: dict[str, object] = {}
        self._bound: tuple | None = None  # the input addresses the packed launches hold
        self._expected = [  # (torch dtype, shape) per input, for the per-call fast check
            (torch_dtype(self.input_types[i].dtype), torch.Size(self.input_types[i].shape))
            for i in range(len(self.input_types))
        ]
        self._static_inputs: list | None = None  # graph mode: the graph's own input buffers
        self._graph = None
        self._tensormaps: dict = {}
        self.set_params(params or {})

    def _plan_launch(self, op, k, arch) -> None:
        from irforge.dialects.kernel.types import TensorMapType

        name = k.attributes["sym_name"]
        fn = self.functions.get(name)
        if fn is None:
            cubin = compile_cuda(k.attributes["source"], name, arch=arch)
            a = k.attributes
            fn = driver.Module(cubin.image, name).function(
                name, a["grid"], a["block"], a["smem"], a.get("dependent_launch", False)
            )
            self.functions[name] = fn
        slots = [(v, t if isinstance(t, TensorMapType) else None) for v, t in zip(op.args, k.attributes["params"])]
        self._launches.append((fn, driver.PackedArgs([0] * len(slots)), slots))

    # ---- params -----------------------------------------------------------------------------------------------
    def set_params(self, params: dict) -> None:
        """Bind params by name (torch tensors or numpy arrays); a CUDA tensor of the right type is used in place."""
        for name, value in params.items():
            t = self.param_types.get(name)
            if t is None:
                known = ", ".join(sorted(self.param_types)) or "none"
                raise error(f"the program has no param @{name} (params: {known})")
            self._params[name] = self._to_device(value, t, f"param @{name}")
        self._graph = None  # pointers may have changed: capture again
        self._bound = None

    def set_state(self, state: dict) -> None:
        """Use these tensors as the program's state (by name): contiguous CUDA tensors of the state's type, which
        the program's calls update in place (another executor's `state` entries, to share them)."""
        torch = self._torch
        for name, value in state.items():
            t = self.state_types.get(name)
            if t is None:
                known = ", ".join(sorted(self.state_types)) or "none"
                raise error(f"the program has no state @{name} (state: {known})")
            ok = (
                isinstance(value, torch.Tensor)
                and value.device == self.device
                and value.dtype == torch_dtype(t.dtype)
                and tuple(value.shape) == t.shape
                and value.is_contiguous()
            )
            if not ok:
                raise error(f"state @{name} must be a contiguous {t} tensor on {self.device}, updated in place")
            self.state[name] = value
        self._graph = None
        self._bound = None

    def _to_device(self, value, t, what: str):
        torch = self._torch
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(np.require(value, requirements="C"))  # ascontiguousarray makes 0-d 1-d
        if not isinstance(value, torch.Tensor):
            raise error(f"{what} must be a torch tensor or numpy array, got {type(value).__name__}")
        if tuple(value.shape) != t.shape:
            raise error(f"{what} has shape {list(value.shape)}, the program takes {t}")
        want = torch_dtype(t.dtype)
        if value.device != self.device or value.dtype != want or not value.is_contiguous():
            if value.is_floating_point() != t.dtype.is_float and value.dtype != torch.bool:
                raise error(f"{what} is {value.dtype}, the program takes {t}")
            value = value.to(device=self.device, dtype=want).contiguous()
        return value

    # ---- calls ------------------------------------------------------------------------------------------------
    def _memory(self, v, inputs):
        kind, key = self._source[v]
        if kind == "input":
            base = inputs[key]
        elif kind == "param":
            base = self._params.get(key)
            if base is None:
                raise error(f"param @{key} is not bound: pass it in `params` or `set_params`")
        elif kind == "state":
            base = self.state[key]
        else:
            base = key
        return base

    def _bind(self, inputs) -> None:
        key = tuple(x.data_ptr() for x in inputs)
        if key == self._bound:
            return  # same tensors as last call: the packed arguments already point at them
        for _, packed, slots in self._launches:
            for i, (v, tmap) in enumerate(slots):
                ptr = self._memory(v, inputs).data_ptr()
                if tmap is None:
                    packed.set_pointer(i, ptr)
                else:
                    packed.set_tensormap(i, self._tensormap(tmap, ptr))
        self._bound = key

    def _tensormap(self, t, address: int) -> driver.TensorMap:
        tm = self._tensormaps.get((t, address))
        if tm is None:
            tm = driver.TensorMap(t.dtype.name, t.shape, t.box, address, t.dtype.bytes, t.swizzle)
            self._tensormaps[(t, address)] = tm
        return tm

    def _launch_all(self, *, capturing: bool = False) -> None:
        stream = driver.current_stream()
        for fn, packed, _ in self._launches:
            fn.launch(packed, stream)
            if self.sync_each and not capturing:
                try:
                    driver.synchronize()
                except driver.CudaError as e:
                    raise driver.CudaError(f"kernel {fn.name} failed: {e}") from None

    def _results(self, inputs) -> list:
        return [self._memory(v, inputs).view(v.type.shape) for v in self._outputs]

    def prepare_inputs(self, *args) -> list:
        """The arguments as contiguous CUDA tensors of the program's input types (what a call uses as is)."""
        n = len(self.input_types)
        if len(args) != n:
            raise error(f"the program takes {n} input(s), got {len(args)}")
        return [self._to_device(a, self.input_types[i], f"input #{i}") for i, a in enumerate(args)]

    def _checked(self, args) -> list:
        """The arguments, through a fast check when they are already what the program takes."""
        torch = self._torch
        if len(args) == len(self._expected) and all(
            type(a) is torch.Tensor
            and a.dtype is dt
            and a.shape == shape
            and a.get_device() == self._device_index
            and a.is_contiguous()
            for a, (dt, shape) in zip(args, self._expected)
        ):
            return list(args)
        return self.prepare_inputs(*args)

    def __call__(self, *args) -> list:
        inputs = self._checked(args)
        if not self.use_graph:
            self._bind(inputs)
            self._launch_all()
            return self._results(inputs)
        if self._static_inputs is None:
            self._static_inputs = [self._torch.empty_like(x) for x in inputs]
        for dst, src in zip(self._static_inputs, inputs):
            dst.copy_(src)
        if self._graph is None:
            self._capture()
        self._graph.replay()
        return self._results(self._static_inputs)

    def _capture(self) -> None:
        torch = self._torch
        self._bound = None
        self._bind(self._static_inputs)
        self._launch_all()  # once outside capture, so launch errors surface here and not inside the graph
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._launch_all(capturing=True)
        self._graph = graph

    def kernel_times(self, *args, spin_cycles: int = 50_000_000) -> list[tuple[str, float]]:
        """One eager run, an event between consecutive launches: (kernel, milliseconds) per launch, in order.

        The launches are queued behind a spin on the stream (`spin_cycles` clock cycles, ~25 ms), so that they run
        back to back, as in a graph replay, rather than as fast as the host issues them; a spin that ends before
        the queue is full is refused (the times would hold the host's launch latency)."""
        torch = self._torch
        inputs = self._checked(args)
        self._bind(inputs)
        events = [torch.cuda.Event(enable_timing=True) for _ in range(len(self._launches) + 1)]
        stream = driver.current_stream()
        torch.cuda.synchronize()
        torch.cuda._sleep(spin_cycles)
        events[0].record()
        for (fn, packed, _), done in zip(self._launches, events[1:]):
            fn.launch(packed, stream)
            done.record()
        queued_behind_spin = not events[0].query()
        events[-1].synchronize()
        if not queued_behind_spin:
            raise error(f"the spin of {spin_cycles} cycles ended before the launches were queued: raise spin_cycles")
        return [(fn.name, a.elapsed_time(b)) for (fn, _, _), a, b in zip(self._launches, events, events[1:])]

    def resources(self) -> dict[str, dict[str, int]]:
        """Per kernel: registers, local-memory bytes (spills), static shared memory."""
        return {name: fn.resources() for name, fn in self.functions.items()}


def run_program(module: Operation, *args, params=None, **kw) -> list:
    """Build an executor and call it once."""
    return Executor(module, params=params, **kw)(*args)
