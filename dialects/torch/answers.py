"""ATen's answers to the torch dialect's verifier, kept on disk by PyTorch's version.

Whether a call is valid and what it gives depends only on the op, its argument types and values, and the installed
PyTorch (`aten.check_call` asks it). Importing PyTorch costs a process more than a second and a half; with every
answer a program needs already on disk (`$IRFORGE_CACHE_DIR/aten/`), `irforge-opt` on torch-level IR verifies it
without importing PyTorch at all. New answers are added to the file when the process ends.
"""

from __future__ import annotations

import atexit
import pickle
from importlib.metadata import PackageNotFoundError, version

from irforge.cache import atomic_write, cache_root
from irforge.ir import Value

MAX_KEPT = 20_000  # answers in the file (about 4 MB): every process that verifies torch-level IR loads it whole
_ANSWERS: dict | None = None  # {call key: result types | the refusal's message}, once loaded
_NEW: dict = {}


def key_of(op) -> tuple:
    """What ATen's answer for the call `op` makes depends on."""
    args, kwargs = op.call_args()
    return (op.aten_name, _signature(args), _signature(kwargs))


def _signature(a):
    if isinstance(a, Value):
        return ("%", a.type)
    if isinstance(a, list):
        return tuple(_signature(x) for x in a)
    if isinstance(a, dict):
        return tuple(sorted((k, _signature(v)) for k, v in a.items()))
    return (type(a).__name__, a)  # 1, 1.0 and True are equal but not the same argument


def lookup(key: tuple):
    """The answer kept for `key`, or None."""
    return _kept().get(key)


def remember(key: tuple, answer) -> None:
    if not _NEW:
        atexit.register(_save)
    _NEW[key] = answer
    _kept()[key] = answer


def _kept() -> dict:
    global _ANSWERS
    if _ANSWERS is None:
        _ANSWERS = _read()
    return _ANSWERS


def _read() -> dict:
    try:
        return pickle.loads(_path().read_bytes())
    except Exception:  # no file yet, an unreadable one, or no PyTorch installed: ask PyTorch
        return {}


def _save() -> None:
    merged = {**_read(), **_NEW}  # with what other processes kept meanwhile
    if len(merged) > MAX_KEPT:  # fuzzed programs make new signatures without end: start the file over
        merged = dict(_NEW)
    try:
        atomic_write(_path(), pickle.dumps(merged, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # an answer that does not pickle is asked again next time
        pass


def _path():
    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = "none"
    return cache_root() / "aten" / f"torch-{torch_version}.pickle"
