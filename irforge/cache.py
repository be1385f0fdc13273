"""irforge's cache folder on disk (`$IRFORGE_CACHE_DIR`, default `~/.cache/irforge`): compiled CUBINs, compiled
models, the parser's tables, the index of built-in passes, ATen's answers to the torch dialect's verifier. Entries
are written whole or not at all, so concurrent processes share it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def cache_root() -> Path:
    return Path(os.environ.get("IRFORGE_CACHE_DIR") or Path.home() / ".cache" / "irforge")


def atomic_write(path: Path, data: bytes) -> None:
    """Write through a temporary file and a rename, so a concurrent reader never sees half an entry."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache costs the work again, nothing else
