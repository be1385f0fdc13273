"""What the simulator keeps: device buffers and a block's shared memory (with the race checks' bookkeeping),
mbarriers, tensor maps, a warp's state, and values as numpy arrays with one row per lane."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from irforge.scalar_ops import numpy_dtype, quantize
from irforge.target import target
from irforge.types import ScalarType, TensorType

from ..types import FragType, MbarrierType, SmemType, TensorMapType, element_type

WARP = target().warp_size
_NO_THREAD = -1
_MANY = -2  # several threads read an address since the last barrier


# ---- memory ----------------------------------------------------------------------------------------------------
class GlobalBuffer:
    """A device buffer: flat storage plus what the race checks need (who wrote each element, in which launch)."""

    def __init__(self, dtype: ScalarType, numel: int, data: np.ndarray | None = None, name: str = "buffer"):
        self.dtype = dtype
        self.name = name
        if data is None:
            fill = np.nan if dtype.is_float else 0
            self.data = np.full(numel, fill, dtype=numpy_dtype(dtype))
            self.written = np.zeros(numel, dtype=bool)
        else:
            self.data = quantize(np.ascontiguousarray(data).reshape(-1), dtype).copy()
            self.written = np.ones(numel, dtype=bool)
        self.w_launch = np.full(numel, -1, dtype=np.int64)
        self.w_thread = np.full(numel, _NO_THREAD, dtype=np.int64)
        self.w_epoch = np.full(numel, -1, dtype=np.int64)

    @property
    def numel(self) -> int:
        return self.data.size


class SharedBuffer:
    """A shared-memory buffer of one block, with per-element race-tracking state for the current barrier epoch."""

    def __init__(self, t: SmemType):
        self.type = t
        n = t.numel
        self.data = np.zeros(n, dtype=numpy_dtype(t.dtype))
        self.written = np.zeros(n, dtype=bool)
        self.pending = np.zeros(n, dtype=bool)  # an async copy (cp.async, TMA) is on its way here
        self.w_thread = np.full(n, _NO_THREAD, dtype=np.int64)
        self.w_epoch = np.full(n, -1, dtype=np.int64)
        self.r_thread = np.full(n, _NO_THREAD, dtype=np.int64)
        self.r_epoch = np.full(n, -1, dtype=np.int64)
        # the cluster barrier count at the last write, and at another block's last read (cluster.py)
        self.w_cluster = np.full(n, -1, dtype=np.int64)
        self.r_cluster = np.full(n, -1, dtype=np.int64)
        # Reads of never-written addresses in the current epoch: {address: (op, thread)}. A write by another thread
        # later in the epoch makes one a race (the barrier between them is missing); at the barrier, the rest are
        # reads of memory nothing wrote.
        self.unwritten_reads: dict[int, tuple] = {}


@dataclass
class Mbarrier:
    initialized: bool = False
    count: int = 0
    pending: int = 0  # arrivals still missing in the current phase
    tx: int = 0  # transaction bytes still missing in the current phase
    completed: int = 0  # phases completed so far
    transactions: list = field(default_factory=list)  # in-flight TMA copies that complete on this barrier


class MbarrierArray:
    def __init__(self, t: MbarrierType):
        self.bars = [Mbarrier() for _ in range(t.count)]


@dataclass
class TensorMapRef:
    buffer: GlobalBuffer
    type: TensorMapType


# ---- a warp ----------------------------------------------------------------------------------------------------
class Warp:
    def __init__(self, index: int, lanes: np.ndarray):
        self.index = index
        self.lanes = lanes  # linear thread ids in the block
        self.full = np.ones(len(lanes), dtype=bool)
        self.waiting = None  # None, ("barrier", op) or ("mbarrier", op, bar_state, parity)
        self.done = False
        self.griddep_waited = False  # past its kernel.griddepcontrol_wait
        self.open_group: list = []  # cp.async copies not yet committed
        self.groups: list = []  # committed cp.async groups, oldest first
        # wgmma: accumulators in flight {result value: its lanes' values once ready}, the wgmmas issued since the
        # last commit and the committed groups (each wgmma with the shared memory it read), whether a wgmma_fence
        # came since the last wait
        self.wgmma_inflight: dict = {}
        self.wgmma_open: list = []
        self.wgmma_groups: list = []
        self.wgmma_fenced = False
        self.wgmma_fenced_values: dict = {}  # the values that existed at the last wgmma_fence
        self.registers: list = []  # the (action, count) of each kernel.setmaxnreg it ran


# ---- values ----------------------------------------------------------------------------------------------------
def _per_thread(t) -> tuple[int, ...]:
    if isinstance(t, TensorType):
        return t.shape
    if isinstance(t, FragType):
        return (t.per_lane,)
    return ()


def _full(mask, t, value) -> np.ndarray:
    et = element_type(t)
    return quantize(np.full((len(mask), *_per_thread(t)), value), et)


def _hint(v) -> str:
    return v.name_hint or "buffer"
