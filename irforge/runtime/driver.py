"""The CUDA driver API through cuda-bindings: device queries, module load, pre-packed launches, tensor maps.

Everything here shares the primary context of the current device, which is the context torch's runtime uses, so
torch tensors are device buffers as they are (`tensor.data_ptr()`), launches go to torch's current stream, and
torch's CUDA-graph capture records them. Every driver call's result is checked; a failure raises `CudaError`
naming the call and the driver's error name and message.
"""

from __future__ import annotations

import functools

import numpy as np

from irforge.diagnostics import IRForgeError
from irforge.target import target


class CudaError(IRForgeError):
    """A CUDA driver call failed."""


def _cu():
    from cuda.bindings import driver

    return driver


def check(result, what: str):
    """The values of a cuda-bindings call's result tuple, or CudaError if its status is not CUDA_SUCCESS."""
    cu = _cu()
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise CudaError(f"{what} failed: {error_text(err)}")
    return values[0] if len(values) == 1 else tuple(values) if values else None


def error_text(err) -> str:
    cu = _cu()
    try:
        _, name = cu.cuGetErrorName(err)
        _, msg = cu.cuGetErrorString(err)
        dec = lambda s: s.decode() if isinstance(s, bytes) else str(s)
        return f"{dec(name)}: {dec(msg)}"
    except Exception:  # the error code itself is the most we can say
        return str(err)


@functools.cache
def has_gpu() -> bool:
    """Whether a CUDA GPU and driver are usable. Every GPU test skips through this; it never raises (cuInit raises
    rather than returning an error where no driver library exists)."""
    try:
        cu = _cu()
        (err,) = cu.cuInit(0)
        if err != cu.CUresult.CUDA_SUCCESS:
            return False
        err, count = cu.cuDeviceGetCount()
        return err == cu.CUresult.CUDA_SUCCESS and count > 0
    except Exception:
        return False


def _torch_cuda():
    """torch, if it has CUDA (buffers, streams and graphs then come from torch), else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def current_device() -> int:
    torch = _torch_cuda()
    return torch.cuda.current_device() if torch is not None else 0


@functools.cache
def _primary_context(device: int):
    cu = _cu()
    check(cu.cuInit(0), "cuInit")
    dev = check(cu.cuDeviceGet(device), "cuDeviceGet")
    return check(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")


def ensure_context(device: int | None = None):
    """Make the device's primary context (torch's) current on this thread; returns it."""
    if not has_gpu():
        raise CudaError("no CUDA GPU is available (cuInit failed or found no device)")
    device = current_device() if device is None else device
    torch = _torch_cuda()
    if torch is not None:
        torch.cuda.init()
    ctx = _primary_context(device)
    check(_cu().cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


def _device_handle(device: int | None = None):
    ensure_context(device)
    return check(_cu().cuDeviceGet(current_device() if device is None else device), "cuDeviceGet")


def device_attribute(name: str, device: int | None = None) -> int:
    cu = _cu()
    attr = getattr(cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
    return check(cu.cuDeviceGetAttribute(attr, _device_handle(device)), f"cuDeviceGetAttribute({name})")


def compute_capability(device: int | None = None) -> tuple[int, int]:
    return (
        device_attribute("COMPUTE_CAPABILITY_MAJOR", device),
        device_attribute("COMPUTE_CAPABILITY_MINOR", device),
    )


def device_name(device: int | None = None) -> str:
    raw = check(_cu().cuDeviceGetName(256, _device_handle(device)), "cuDeviceGetName")
    return raw.split(b"\0", 1)[0].decode() if isinstance(raw, bytes) else str(raw)


def driver_version() -> str:
    v = check(_cu().cuDriverGetVersion(), "cuDriverGetVersion")
    return f"{v // 1000}.{(v % 1000) // 10}"


_STREAMS: dict = {}  # CUstream wrappers by handle: building one costs more than the launch it serves


def current_stream():
    """torch's current stream on the current device (the legacy default stream without torch)."""
    torch = _torch_cuda()
    handle = torch.cuda.current_stream().cuda_stream if torch is not None else 0
    s = _STREAMS.get(handle)
    if s is None:
        s = _STREAMS[handle] = _cu().CUstream(handle)
    return s


def synchronize() -> None:
    check(_cu().cuCtxSynchronize(), "cuCtxSynchronize")


# ---- modules and functions -------------------------------------------------------------------------------------
class Function:
    """A kernel entry point of a loaded module, ready to launch with a fixed configuration."""

    def __init__(self, module: Module, name: str, grid, block, smem: int, dependent: bool = False):
        cu = _cu()
        self.module = module
        self.name = name
        self.grid = tuple(grid)
        self.block = tuple(block)
        self.smem = smem
        self.handle = check(cu.cuModuleGetFunction(module.handle, name.encode()), f"cuModuleGetFunction({name})")
        self._cu_launch = cu.cuLaunchKernel
        self._success = cu.CUresult.CUDA_SUCCESS
        self._config = self._dependent_config() if dependent else None
        static = self.attribute("SHARED_SIZE_BYTES") if smem else 0
        if smem + static > target().smem_static:  # above it (static and dynamic together) a launch must opt in
            limit = device_attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
            if smem + static > limit:
                raise CudaError(
                    f"kernel {name} needs {smem} bytes of dynamic and {static} of static shared memory; the device"
                    f" allows {limit} per block"
                )
            check(
                cu.cuFuncSetAttribute(
                    self.handle, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem
                ),
                f"cuFuncSetAttribute({name}, MAX_DYNAMIC_SHARED_SIZE_BYTES={smem})",
            )

    def attribute(self, name: str) -> int:
        cu = _cu()
        attr = getattr(cu.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
        return check(cu.cuFuncGetAttribute(attr, self.handle), f"cuFuncGetAttribute({self.name}, {name})")

    def resources(self) -> dict[str, int]:
        """The compiler's resource report: registers, spills to local memory, static shared memory."""
        return {
            "registers": self.attribute("NUM_REGS"),
            "local_bytes": self.attribute("LOCAL_SIZE_BYTES"),
            "static_smem": self.attribute("SHARED_SIZE_BYTES"),
        }

    def _dependent_config(self):
        """A launch configuration that lets this kernel start before the launch ahead of it in the stream ends
        (programmatic stream serialization: the kernel waits for it with `griddepcontrol.wait`)."""
        cu = _cu()
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        attr.value.programmaticStreamSerializationAllowed = 1
        config = cu.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = self.grid
        config.blockDimX, config.blockDimY, config.blockDimZ = self.block
        config.sharedMemBytes = self.smem
        config.attrs = [attr]
        config.numAttrs = 1
        return config

    def launch(self, args: PackedArgs, stream=None) -> None:
        # The hot path of every call: no work beyond the driver call and its status check.
        stream = current_stream() if stream is None else stream
        if self._config is None:
            (err,) = self._cu_launch(self.handle, *self.grid, *self.block, self.smem, stream, args.address, 0)
        else:
            self._config.hStream = stream
            (err,) = _cu().cuLaunchKernelEx(self._config, self.handle, args.address, 0)
        if err != self._success:
            raise CudaError(
                f"cuLaunchKernel({self.name}, grid={self.grid}, block={self.block}, smem={self.smem}) failed:"
                f" {error_text(err)}"
            )


class Module:
    """A CUBIN loaded into the current context."""

    def __init__(self, image: bytes, name: str = "module"):
        ensure_context()
        self.name = name
        self.image = image
        self.handle = check(_cu().cuModuleLoadData(image), f"cuModuleLoadData({name})")

    def function(self, name: str, grid=(1, 1, 1), block=(1, 1, 1), smem: int = 0, dependent: bool = False) -> Function:
        return Function(self, name, grid, block, smem, dependent)


# ---- arguments -------------------------------------------------------------------------------------------------
class TensorMap:
    """A TMA descriptor (CUtensorMap, 128 bytes) over a row-major tensor in global memory; `swizzle` (0, 32, 64 or
    128 bytes) picks the copy engine's swizzle mode."""

    _DTYPES = {
        "f32": "FLOAT32",
        "f64": "FLOAT64",
        "f16": "FLOAT16",
        "bf16": "BFLOAT16",
        "i32": "INT32",
        "i64": "INT64",
        "u8": "UINT8",
        "i8": "UINT8",
        "bool": "UINT8",
        "i16": "UINT16",
    }

    def __init__(self, dtype: str, shape, box, address: int, elem_bytes: int, swizzle: int = 0):
        cu = _cu()
        rank = len(shape)
        # The driver takes dimensions innermost first, and the byte strides of all but the innermost.
        dims = [cu.cuuint64_t(d) for d in reversed(shape)]
        strides, s = [], elem_bytes
        for d in reversed(shape[1:]):
            s *= d
            strides.append(cu.cuuint64_t(s))
        self.handle = check(
            cu.cuTensorMapEncodeTiled(
                getattr(cu.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{self._DTYPES[dtype]}"),
                rank,
                address,
                dims,
                strides,
                [cu.cuuint32_t(b) for b in reversed(box)],
                [cu.cuuint32_t(1)] * rank,
                cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
                getattr(cu.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{f'{swizzle}B' if swizzle else 'NONE'}"),
                cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            ),
            f"cuTensorMapEncodeTiled({dtype}{list(shape)}, box {list(box)})",
        )
        self.address = address

    @property
    def param_address(self) -> int:
        """Where the 128 descriptor bytes live (the kernel parameter is the descriptor itself, by value)."""
        return self.handle.getPtr()


class PackedArgs:
    """A launch's `void**` parameter array, built once: pointer slots can be rebound without repacking."""

    def __init__(self, values):
        self._keep = []  # the objects whose memory the pointer array points into
        self._maps: dict[int, TensorMap] = {}  # tensor-map slots (kept alive while bound)
        self._slots: dict[int, np.ndarray] = {}
        addrs = []
        for i, v in enumerate(values):
            if isinstance(v, TensorMap):
                self._keep.append(v)
                addrs.append(v.param_address)
                continue
            cell = np.array([v], dtype=np.uint64) if isinstance(v, int) else np.array([v])
            self._slots[i] = cell
            self._keep.append(cell)
            addrs.append(cell.ctypes.data)
        self._ptrs = np.array(addrs, dtype=np.uint64)
        self.address = int(self._ptrs.ctypes.data) if len(self._ptrs) else 0  # the array never moves

    def set_pointer(self, i: int, address: int) -> None:
        self._slots[i][0] = address

    def set_tensormap(self, i: int, tm: TensorMap) -> None:
        self._maps[i] = tm
        self._ptrs[i] = tm.param_address
