"""Warpgroup MMA (sm_90a): `wgmma.mma_async` reading its operands from shared memory through matrix descriptors.

A warpgroup (four consecutive warps, 128 threads) multiplies A [64, 16] by B [16, N] into its accumulator
`!kernel.frag<"acc", f32, [64, N], "wgmma">` (warp w of the group holds rows 16w .. 16w + 15). B, and A unless it
comes from the warpgroup's registers, is a shared-memory tile named by a 64-bit descriptor (its start address, the
byte distance between groups of 8 rows, and the swizzle mode the tile was written with). A shared tile is K-major,
the layout `nn.Linear` keeps: A's 64 rows and B's N rows (B given as [N, 16], its transpose) run along the buffer's
second-to-last dimension, K along the last, rows of 32, 64 or 128 bytes swizzled as the tensor memory accelerator
writes them in that mode (`tma_swizzle`) — the layouts the descriptor can name. B may also be MN-major
(`transpose`: stored [16, N], K down the rows, N along rows of exactly the swizzle's span), which the same
descriptor names with the roles of rows and columns exchanged; N wider than a span comes in blocks of the buffer's
third-to-last dimension (a stage stored in `columns`), whose distance apart the descriptor's LBO gives.

The instruction is asynchronous: `kernel.wgmma_fence` orders the accumulator registers' earlier writes before it,
`kernel.wgmma_commit` closes a group of issued wgmmas, and `kernel.wgmma_wait N` waits until at most N groups are in
flight; only then may the accumulator be read, or the operands' shared memory be written again.

`descriptor(t)` and `operand_address(...)` are the one model of the descriptor that the simulator reads through and
the CUDA emitter encodes, so they cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from irforge.attributes import UNIT
from irforge.index_expr import AffineMap
from irforge.target import target

from .ops import BareOp, GroupWaitOp, IndexedOp
from .types import FragType, SmemType, tma_swizzle

# Swizzle mode field of a descriptor (bits 62-63) per row span in bytes.
SWIZZLE_MODES = {128: 1, 64: 2, 32: 3}


@dataclass(frozen=True)
class Descriptor:
    """The layout fields of a shared-memory matrix descriptor (the start address is the tile's)."""

    span: int  # bytes of a row, the swizzle's span: 32, 64 or 128
    sbo: int  # stride byte offset: bytes between consecutive groups of 8 rows
    # leading byte offset: bytes between blocks of a span of N in an MN-major tile; unused by K-major swizzled
    # layouts (the field is then 1, 16 bytes)
    lbo: int = 16

    @property
    def mode(self) -> int:
        return SWIZZLE_MODES[self.span]

    def bits(self, start: int) -> int:
        """The 64-bit descriptor of a tile starting at shared-memory byte address `start` (PTX's matrix descriptor
        format: start, LBO and SBO in 16-byte units at bits 0, 16 and 32; the swizzle mode at bit 62)."""
        return (
            ((start & 0x3FFFF) >> 4)
            | ((self.lbo >> 4) & 0x3FFF) << 16
            | ((self.sbo >> 4) & 0x3FFF) << 32
            | self.mode << 62
        )


def row_blocks(row_bytes: int) -> int | None:
    """The blocks a row of `row_bytes` is stored in for descriptors to read it: 1 where it is a swizzle span (32,
    64 or 128 bytes), one a 128-byte span where it is several (a stage's `columns`), None otherwise."""
    if row_bytes in SWIZZLE_MODES:
        return 1
    span = max(SWIZZLE_MODES)
    return row_bytes // span if row_bytes % span == 0 else None


def descriptor(t: SmemType) -> Descriptor | str:
    """The descriptor layout of K-major tiles of shared buffer `t`, or why a descriptor cannot name them: rows of
    32, 64 or 128 bytes of a 16-bit type, swizzled over that span as the tensor memory accelerator writes them."""
    if t.dtype.bytes != 2 or t.dtype.name not in ("f16", "bf16"):
        return f"wgmma multiplies f16 or bf16 tiles, not {t.dtype}"
    span = t.shape[-1] * t.dtype.bytes
    if span not in SWIZZLE_MODES:
        return f"a descriptor's K-major rows are 32, 64 or 128 bytes, not {span} ({t})"
    want = tma_swizzle(span, t.dtype)
    if tuple(t.swizzle) != want:
        return f"rows of {span} bytes need the {span}-byte swizzle({', '.join(map(str, want))}), not {t}"
    return Descriptor(span, 8 * span)


def hardware_swizzle(addr, span: int):
    """The byte address the tensor cores read for byte address `addr` of a tile in `span`-byte swizzle mode: the
    16-byte chunk index (bits 4 ..) XOR the 128-byte row index (bits 7 ..), log2(span / 16) bits of each."""
    bits = (span // 16).bit_length() - 1
    return addr ^ (((addr >> 7) & ((1 << bits) - 1)) << 4)


def operand_address(d: Descriptor, start: int, row, col, dtype_bytes: int):
    """Byte address (in the buffer) of element (row, col) of the K-major tile whose descriptor has layout `d` and
    start byte `start`: groups of 8 rows SBO apart, rows `span` bytes apart inside a group, then the swizzle. An
    MN-major tile is addressed the same way with (k, n) for (row, col), its spans of N LBO apart."""
    b = col * dtype_bytes
    offset = (row // 8) * d.sbo + (row % 8) * d.span + (b // d.span) * d.lbo + b % d.span
    return hardware_swizzle(start + offset, d.span)


class WgmmaOp(IndexedOp):
    """`wgmma.mma_async` m64nNk16: a warpgroup's accumulator `c` [64, N] plus A [64, 16] times B [16, N]. A is a tile
    of shared memory at `a[index_a]`, K-major, or the warpgroup's registers (`!kernel.frag<"a", T, [64, 16],
    "wgmma">`, no index: how a product computed in registers, such as attention's exp(x - m), enters the next one).
    B is a tile of shared memory at `b[index_b]`: K-major (stored [N, 16]), or with `transpose` MN-major (stored
    [16, N], N along rows of exactly the swizzle's span: V [keys, head dim] as attention reads it). Asynchronous:
    the result is ready after a `kernel.wgmma_wait`; the four warps of the warpgroup issue it together."""

    name = "kernel.wgmma"
    operand_names = ("a", "b", "c", "*indices")
    result_names = ("result",)
    attribute_types = {"index_a": AffineMap, "index_b": AffineMap}
    optional_attributes = {"transpose": type(UNIT)}
    num_regions = 0
    num_fixed = 3
    index_groups = ("index_a", "index_b")

    @classmethod
    def infer_result_types(cls, operand_types, attributes):
        return [operand_types[2]]

    @property
    def registers_a(self) -> bool:
        """Whether A comes from the warpgroup's registers (else from shared memory through a descriptor)."""
        return isinstance(self.a.type, FragType)

    def b_tile(self) -> tuple[int, int]:
        """The shape of B's tile as it is stored: [N, 16] K-major, [16, N] with `transpose`."""
        n = self.c.type.shape[1]
        return (16, n) if "transpose" in self.attributes else (n, 16)

    def b_blocks(self) -> int:
        """Blocks of the buffer's third-to-last dimension an MN-major B spans (1: N is its rows' length)."""
        return self.c.type.shape[1] // self.b.type.shape[-1] if "transpose" in self.attributes else 1

    def descriptor(self, which: str) -> Descriptor:
        """The descriptor layout of operand `which` ("a" or "b"; a verified op's)."""
        t = getattr(self, which).type
        d = descriptor(t)
        if which == "b" and self.b_blocks() > 1:
            return Descriptor(d.span, d.sbo, t.strides[-3] * t.dtype.bytes)
        return d

    def verify_op(self):
        self.verify_indices()
        a, b, c = self.a.type, self.b.type, self.c.type
        if not (isinstance(a, (SmemType, FragType)) and isinstance(b, SmemType) and isinstance(c, FragType)):
            raise self.error(
                "multiplies A (a !kernel.smem tile or registers) by a !kernel.smem tile into a !kernel.frag"
            )
        if (c.role, c.layout, c.dtype.name) != ("acc", "wgmma", "f32") or c.shape[0] != 64:
            raise self.error(f'accumulates into a !kernel.frag<"acc", f32, [64, N], "wgmma">, not {c}')
        if a.dtype != b.dtype:
            raise self.error(f"multiplies tiles of one type, not {a.dtype} and {b.dtype}")
        n = c.shape[1]
        if n % 8 or not 8 <= n <= 256:
            raise self.error(f"has N from 8 to 256 in steps of 8, not {n}")
        tiles = [("B", b, self.b_tile())]
        if self.registers_a:
            if (a.role, a.layout, a.shape) != ("a", "wgmma", (64, 16)):
                raise self.error(
                    f'takes A from registers as a !kernel.frag<"a", {a.dtype}, [64, 16], "wgmma">, not {a}'
                )
            if self.exprs("index_a"):
                raise self.error("takes no index for A in registers")
        else:
            tiles.insert(0, ("A", a, (64, 16)))
        for what, t, (rows, cols) in tiles:
            d = descriptor(t)
            if isinstance(d, str):
                raise self.error(f"{what}: {d}")
            if len(self.exprs(f"index_{what.lower()}")) != len(t.shape):
                raise self.error(f"{what} takes {len(t.shape)} indices (the tile's first element) into {t}")
            across = what == "B" and "transpose" in self.attributes  # N may run on into the next blocks
            if t.shape[-2] < rows or (t.shape[-1] < cols and not across):
                raise self.error(f"{what}'s tile [{rows}, {cols}] does not fit {t}")
        blocks = n // b.shape[-1]
        if "transpose" in self.attributes and (n % b.shape[-1] or (blocks > 1 and len(b.shape) < 3)):
            raise self.error(
                f"B stored [16, N] (transpose) fills the rows of its buffer, or whole blocks of its third-to-last "
                f"dimension: N = {n} with rows of {b.shape[-1]}"
            )
        if self.result.type != c:
            raise self.error(f"result must be {c}")

    def print_custom(self, p):
        p.write("kernel.wgmma ", p.value(self.a))
        if not self.registers_a:
            p.write("[", self.fmt(p, "index_a"), "]")
        p.write(", ", p.value(self.b), "[", self.fmt(p, "index_b"), "]")
        p.write(" transpose" if "transpose" in self.attributes else "", ", ", p.value(self.c))
        p.write(" : ", p.type(self.result.type))


class WgmmaFenceOp(BareOp):
    """`wgmma.fence`: orders the warpgroup's earlier register (and shared-memory) accesses before the wgmmas after
    it; needed before the first wgmma that reads an accumulator other instructions wrote."""

    name = "kernel.wgmma_fence"


class WgmmaCommitOp(BareOp):
    """`wgmma.commit_group`: the wgmmas issued since the last commit form one group."""

    name = "kernel.wgmma_commit"


class WgmmaWaitOp(GroupWaitOp):
    """`wgmma.wait_group N`: wait until at most `pending` committed groups are in flight; their accumulators are
    then ready and their operands' shared memory free."""

    name = "kernel.wgmma_wait"


WARPGROUP = 128  # threads
PRODUCER_REGISTERS = 40  # a producer warpgroup only issues copies (CUTLASS gives its producers as many)


def launch_registers(threads: int) -> int:
    """Registers per thread a block of `threads` starts with, launch-bounded to one block a multiprocessor: the
    register file over its warpgroups (ptxas counts whole ones: 288 threads get 384's 168), a multiple of 8."""
    groups = -(-threads // WARPGROUP)
    return min(256, target().registers_per_sm // (groups * WARPGROUP) // 8 * 8)


def register_split(consumers: int) -> tuple[int, int] | None:
    """(producer, consumer) registers per thread for a block of `consumers` threads and one producer warpgroup:
    the producer gives back all but PRODUCER_REGISTERS and the consumers share them out; None where that gains the
    consumers nothing (a block of 256 threads starts with all a thread may hold)."""
    base = launch_registers(consumers + WARPGROUP)
    gain = (base - PRODUCER_REGISTERS) * WARPGROUP // consumers // 8 * 8
    more = min(256, base + gain)
    return (PRODUCER_REGISTERS, more) if more > base else None


class SetMaxRegistersOp(BareOp):
    """`setmaxnreg.{inc,dec}.sync.aligned`: the executing warpgroup's registers per thread become `count` (a
    multiple of 8, 24 to 256), taken from or given back to the block's pool. Every warp of a warpgroup executes
    the same one: a warp-specialized kernel's producer gives back what its consumers take."""

    name = "kernel.setmaxnreg"
    attribute_types = {"action": str, "count": int}

    def verify_op(self):
        if self.attributes["action"] not in ("inc", "dec"):
            raise self.error(f"action must be inc or dec, not {self.attributes['action']!r}")
        count = self.attributes["count"]
        if count % 8 or not 24 <= count <= 256:
            raise self.error(f"count must be a multiple of 8 from 24 to 256, not {count}")

    def print_custom(self, p):
        p.write(f"{self.name} {self.attributes['action']} {self.attributes['count']}")


OPS = (WgmmaOp, WgmmaFenceOp, WgmmaCommitOp, WgmmaWaitOp, SetMaxRegistersOp)
