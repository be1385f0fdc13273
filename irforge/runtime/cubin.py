"""What a CUBIN records about its kernels: registers, stack frame and static shared memory, read from its ELF image.

ptxas writes each entry function's register count (`EIATTR_REGCOUNT`) and stack frame (`EIATTR_FRAME_SIZE`) into
the image's `.nv.info` section, one record per function symbol, and gives each function that declares shared
memory a `.nv.shared.<name>` section of that size. From sm_90 on, a kernel's shared window begins with the 1 KB the
system reserves in every block (`.nv.shared.reserved.0` is then in the image), and that section counts it too.
These are the numbers the driver launches with, so the tuner and the tests read them here, not from ptxas' printed
report, which the compiler's log does not always carry.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from irforge.diagnostics import IRForgeError

EIATTR_FRAME_SIZE = 0x11
EIATTR_REGCOUNT = 0x2F
EIFMT_SVAL = 4  # a record with a u16 size and that many bytes; the other formats take 4 bytes in all
RESERVED_SMEM = 1024  # the system's share of each block's shared memory, where the image reserves it
_RESERVED_SECTION = ".nv.shared.reserved."


@dataclass(frozen=True)
class ResourceUsage:
    """One entry function's resources: registers a thread, bytes of stack frame and of static shared memory (the
    system's reserve not counted)."""

    registers: int
    stack_frame: int
    smem: int

    @property
    def spills(self) -> bool:
        """Whether the kernel touches local memory. ptxas spills registers into the stack frame, and irforge's
        kernels keep no arrays there, so a frame means spilled registers."""
        return self.stack_frame > 0


@dataclass(frozen=True)
class _Section:
    name: str
    offset: int
    size: int
    link: int


def resource_usage(image: bytes) -> dict[str, ResourceUsage]:
    """{entry function: ResourceUsage} of every function of a CUBIN that ptxas gave a register count."""
    try:
        sections = _sections(image)
    except struct.error as e:
        raise IRForgeError(f"not a CUBIN: its ELF headers are cut short ({e})") from None
    by_name = {s.name: s for s in sections}
    symtab = by_name.get(".symtab")
    if symtab is None:
        raise IRForgeError("not a CUBIN: it has no symbol table")
    symbols = _symbol_names(image, symtab, sections[symtab.link])
    counts: dict[int, dict[int, int]] = {EIATTR_REGCOUNT: {}, EIATTR_FRAME_SIZE: {}}
    info = by_name.get(".nv.info")
    for attr, value in _records(image[info.offset : info.offset + info.size] if info else b""):
        if attr in counts and len(value) == 8:
            symbol, n = struct.unpack("<II", value)
            counts[attr][symbol] = n
    reserved = RESERVED_SMEM if any(s.name.startswith(_RESERVED_SECTION) for s in sections) else 0
    out = {}
    for symbol, registers in counts[EIATTR_REGCOUNT].items():
        name = symbols[symbol]
        shared = by_name.get(f".nv.shared.{name}")
        smem = max(0, shared.size - reserved) if shared else 0
        out[name] = ResourceUsage(registers, counts[EIATTR_FRAME_SIZE].get(symbol, 0), smem)
    return out


def _sections(image: bytes) -> list[_Section]:
    if image[:4] != b"\x7fELF" or image[4] != 2 or image[5] != 1:
        raise IRForgeError("not a CUBIN: not a little-endian 64-bit ELF image")
    (shoff,) = struct.unpack_from("<Q", image, 0x28)
    entsize, count, names_index = struct.unpack_from("<HHH", image, 0x3A)
    raw = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * entsize) for i in range(count)]
    names_at = raw[names_index][4]
    return [_Section(_string(image, names_at + r[0]), r[4], r[5], r[6]) for r in raw]


def _symbol_names(image: bytes, symtab: _Section, strtab: _Section) -> list[str]:
    entry = 24  # Elf64_Sym
    names = []
    for at in range(symtab.offset, symtab.offset + symtab.size, entry):
        (name,) = struct.unpack_from("<I", image, at)
        names.append(_string(image, strtab.offset + name))
    return names


def _records(data: bytes):
    """(attribute, value bytes) of each record of an `.nv.info` section."""
    at = 0
    while at + 4 <= len(data):
        fmt, attr = data[at], data[at + 1]
        if fmt == EIFMT_SVAL:
            (size,) = struct.unpack_from("<H", data, at + 2)
            yield attr, data[at + 4 : at + 4 + size]
            at += 4 + size
        else:
            yield attr, data[at + 2 : at + 4]
            at += 4


def _string(image: bytes, at: int) -> str:
    return image[at : image.index(b"\0", at)].decode()
