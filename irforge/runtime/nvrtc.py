"""CUDA C++ to CUBIN with NVRTC (through cuda-bindings), with a content-addressed disk cache.

`compile_cuda(source, name, arch=...)` returns a `Cubin`; `resource_usage(source)` reads each kernel's registers,
stack frame and static shared memory from the CUBIN (`cubin.py`). The cache key is a hash of the
source, the options, the prelude header and the NVRTC version, so a changed prelude or compiler never reuses a
stale binary; entries (the CUBIN and NVRTC's log) live in `$IRFORGE_CACHE_DIR` (default `~/.cache/irforge`) under
`cubin/`. NVRTC needs no GPU: with `arch="sm_90a"` CI compiles for Hopper on a CPU-only machine. Compilation
errors raise `IRForgeError` quoting the offending CUDA line with a caret.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from irforge.cache import atomic_write, cache_root
from irforge.diagnostics import Diagnostic, IRForgeError
from irforge.location import FileLineColLoc

from . import cubin

DEFAULT_ARCH = "sm_90a"
_LIBS_LOADED = False


def _nvidia_dirs() -> list[Path]:
    """Folders of the pip-installed CUDA components (`nvidia/cu13`, `nvidia/cuda_nvrtc`, ...) on sys.path."""
    out = []
    for entry in sys.path:
        base = Path(entry) / "nvidia"
        if base.is_dir():
            out.extend(p for p in sorted(base.iterdir()) if (p / "lib").is_dir() or (p / "include").is_dir())
    return out


def _load_libraries() -> None:
    """Make libnvrtc loadable. cuda-bindings looks for it in the running environment's site-packages only; when the
    wheels live elsewhere on sys.path (a venv layered on another through a .pth file), load them here first: the
    bindings then find the library already loaded."""
    global _LIBS_LOADED
    if _LIBS_LOADED:
        return
    for d in _nvidia_dirs():
        lib = d / "lib"
        builtins = sorted(lib.glob("libnvrtc-builtins.so.*"))
        nvrtc = sorted(lib.glob("libnvrtc.so.*"))
        if nvrtc:
            for path in [*[b for b in builtins if ".alt." not in b.name], *[n for n in nvrtc if ".alt." not in n.name]]:
                ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
            break
    _LIBS_LOADED = True


def include_dirs() -> list[str]:
    """CUDA header folders from the pip wheels (cuda_fp16.h, cuda_bf16.h): NVRTC ships no headers of its own."""
    dirs = []
    for d in _nvidia_dirs():
        inc = d / "include"
        if (inc / "cuda_fp16.h").exists():
            dirs.append(str(inc))
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "include" / "cuda_fp16.h").exists():
            dirs.append(str(Path(home) / "include"))
    return dirs


def loaded_library() -> str | None:
    """Where the loaded libnvrtc lives (for reports)."""
    _load_libraries()
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            for line in f:
                if "libnvrtc.so" in line:
                    return line.split()[-1]
    except OSError:
        pass
    return None


def _nvrtc():
    _load_libraries()
    from cuda.bindings import nvrtc

    return nvrtc


def nvrtc_version() -> tuple[int, int]:
    nvrtc = _nvrtc()
    err, major, minor = nvrtc.nvrtcVersion()
    _check(nvrtc, err, "nvrtcVersion")
    return major, minor


def _check(nvrtc, err, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, msg = nvrtc.nvrtcGetErrorString(err)
        raise IRForgeError(f"{what} failed: {msg.decode() if isinstance(msg, bytes) else msg}")


@dataclass(frozen=True)
class Cubin:
    name: str  # the translation unit's name (the kernel's), for messages
    arch: str
    image: bytes
    log: str  # NVRTC's log: its warnings
    key: str  # the cache key
    cached: bool  # came from the disk cache


def cache_dir() -> Path:
    return cache_root() / "cubin"


def _options(arch: str, extra) -> list[str]:
    opts = [f"--gpu-architecture={arch}", "-std=c++17", "--device-as-default-execution-space"]
    opts += [o for o in extra if o not in opts]
    opts += [f"--include-path={d}" for d in include_dirs()]
    return opts


def compile_cuda(
    source: str, name: str = "kernel", *, arch: str | None = None, options=(), headers=None, use_cache: bool = True
) -> Cubin:
    """Compile one translation unit to CUBIN for `arch` (default: the current GPU's, or sm_90a without one).

    `headers` maps include names to sources; the prelude (`irforge_prelude.cuh`) is always available.
    """
    from irforge.dialects.cuda.prelude import PRELUDE_NAME, prelude_source

    arch = arch or default_arch()
    hdrs = {PRELUDE_NAME: prelude_source(), **(headers or {})}
    opts = _options(arch, options)
    version = nvrtc_version()
    h = hashlib.sha256()
    for part in (source, "\0".join(o for o in opts if not o.startswith("--include-path")), repr(version)):
        h.update(part.encode())
        h.update(b"\1")
    for k in sorted(hdrs):
        h.update(k.encode() + b"\2" + hdrs[k].encode() + b"\1")
    key = h.hexdigest()
    path, log_path = cache_dir() / f"{key}.cubin", cache_dir() / f"{key}.log"
    if use_cache and path.exists() and log_path.exists():
        return Cubin(name, arch, path.read_bytes(), log_path.read_text(encoding="utf-8"), key, True)
    image, log = _run_nvrtc(source, name, opts, hdrs)
    if use_cache:
        atomic_write(log_path, log.encode())
        atomic_write(path, image)
    return Cubin(name, arch, image, log, key, False)


def resource_usage(source: str, name: str = "kernel", *, arch: str | None = None, options=(), headers=None):
    """{entry function: ResourceUsage} of `source`, read from the CUBIN of a (cached) compile (`runtime/cubin.py`):
    the binary the executor loads, no GPU needed."""
    return cubin.resource_usage(compile_cuda(source, name, arch=arch, options=options, headers=headers).image)


def _run_nvrtc(source: str, name: str, opts: list[str], headers: dict[str, str]) -> tuple[bytes, str]:
    nvrtc = _nvrtc()
    names = list(headers)
    err, prog = nvrtc.nvrtcCreateProgram(
        source.encode(),
        f"{name}.cu".encode(),
        len(names),
        [headers[n].encode() for n in names],
        [n.encode() for n in names],
    )
    _check(nvrtc, err, "nvrtcCreateProgram")
    try:
        bopts = [o.encode() for o in opts]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(bopts), bopts)
        err_log, size = nvrtc.nvrtcGetProgramLogSize(prog)
        _check(nvrtc, err_log, "nvrtcGetProgramLogSize")
        # writable buffers: `b" " * size` would hand NVRTC an immutable object, for an empty log (size 1) the
        # interpreter's shared one-byte b" ", which every later b" " in the process would then read as NUL
        buf = bytearray(size)
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = bytes(buf).rstrip(b"\0 ").decode(errors="replace")
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(name, source, log, headers)
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        _check(nvrtc, err, "nvrtcGetCUBINSize")
        image = bytearray(size)
        (err,) = nvrtc.nvrtcGetCUBIN(prog, image)
        _check(nvrtc, err, "nvrtcGetCUBIN")
        return bytes(image), log
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


_LOG_LINE = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<sev>error|warning|catastrophic error)[^:]*: (?P<msg>.*)$")


class CompileError(IRForgeError):
    """NVRTC rejected a source: one diagnostic per error, each quoting the CUDA line with a caret."""

    def __init__(self, name: str, source: str, log: str, headers: dict[str, str]):
        self.log = log
        self.source = source
        files = {f"{name}.cu": source, **headers}
        diags = []
        lines = log.splitlines()
        for i, line in enumerate(lines):
            m = _LOG_LINE.match(line)
            if m is None or "error" not in m.group("sev"):
                continue
            file, lineno = m.group("file"), int(m.group("line"))
            text = files.get(file, files.get(os.path.basename(file), ""))
            src_lines = text.splitlines()
            src = src_lines[lineno - 1] if 0 < lineno <= len(src_lines) else ""
            col = _caret_column(lines, i, src)
            diags.append(_SourceDiagnostic(f"NVRTC: {m.group('msg')}", FileLineColLoc(file, lineno, col), src))
        if not diags:
            diags = [Diagnostic("error", f"NVRTC could not compile {name}.cu:\n{log}")]
        if "cuda_fp16.h" in log or "cuda_bf16.h" in log:
            found = ", ".join(include_dirs()) or "none"
            diags[0].message += f" (CUDA headers searched in: {found}; install nvidia-cuda-runtime or set CUDA_HOME)"
        super().__init__(diags)


def _caret_column(log_lines: list[str], i: int, src: str) -> int:
    """Column NVRTC's own caret points at (it echoes the line, then a caret line), else the first non-blank."""
    if i + 2 < len(log_lines) and log_lines[i + 2].strip() == "^":
        echoed, caret = log_lines[i + 1], log_lines[i + 2]
        shift = len(echoed) - len(echoed.lstrip()) - (len(src) - len(src.lstrip()))
        return max(caret.index("^") - shift, 0) + 1
    return len(src) - len(src.lstrip()) + 1


class _SourceDiagnostic(Diagnostic):
    """A diagnostic into generated CUDA: the source line travels with it (it is not a file on disk)."""

    def __init__(self, message: str, loc: FileLineColLoc, src_line: str):
        super().__init__("error", message, loc)
        self.src_line = src_line

    def render(self, with_source: bool = True) -> str:
        flc = self.loc
        out = [f"{flc.file}:{flc.line}:{flc.col}: error: {self.message}"]
        if with_source and self.src_line:
            out.append(self.src_line)
            out.append(" " * (flc.col - 1) + "^")
        return "\n".join(out)


def default_arch() -> str:
    """The current GPU's architecture (sm_90a on Hopper: the `a` unlocks wgmma and setmaxnreg), or sm_90a
    without a GPU."""
    from . import driver

    if not driver.has_gpu():
        return DEFAULT_ARCH
    major, minor = driver.compute_capability()
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")
