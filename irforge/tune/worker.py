"""Work in processes of their own, so that what goes wrong there costs one request, not the run.

A `Worker` is a fresh interpreter (`python -m irforge.tune.worker`; not a fork of a process that holds torch's
threads or a CUDA context, nor multiprocessing's spawn, which re-runs the caller's main module) serving requests
one at a time: `call("module:function", *args, timeout=S)` runs the function there and returns its result. The
process keeps its state between requests (a GPU worker keeps its CUDA context, inputs and reference outputs).

- A request that outlives its timeout (a hung kernel) kills the process: `WorkerFailed("timeout")`.
- A process that dies (a crash, an abort, the OOM killer) is `WorkerFailed("crash")`, with the end of its stderr.
- An exception in the function comes back as `RemoteError` (its type, message and traceback); the process lives.

Either way the next call starts a fresh process. Requests and replies are pickled, each preceded by its length;
the child's own stdout goes to its stderr (a log file), so nothing a library prints can break the protocol.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_HEADER = struct.Struct("<Q")


class WorkerFailed(Exception):
    """The worker process hung (kind "timeout") or died (kind "crash") during a request."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


class RemoteError(Exception):
    """The requested function raised; the worker is still alive."""

    def __init__(self, type_name: str, message: str, trace: str):
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message
        self.trace = trace


class Worker:
    def __init__(self, env: dict[str, str] | None = None, name: str = "worker", log_dir: str | None = None):
        self.env = {**os.environ, **(env or {})}
        self.name = name
        self.log_path = Path(log_dir or tempfile.gettempdir()) / f"irforge-{name}-{os.getpid()}.log"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def _start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "irforge.tune.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=self.env,
            )
        finally:
            log.close()
        self.starts += 1

    def call(self, function: str, *args, timeout: float):
        """Run `function` ("module:name") on `args` in the worker; see the module docstring for failures."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        payload = pickle.dumps((function, args))
        try:
            self.proc.stdin.write(_HEADER.pack(len(payload)) + payload)
            self.proc.stdin.flush()
            reply = self._read(time.monotonic() + timeout)
        except WorkerFailed:
            self.stop()
            raise
        except (BrokenPipeError, OSError) as e:
            self.stop()
            raise WorkerFailed("crash", f"the worker went away ({e}); {self._tail()}") from None
        ok, value = pickle.loads(reply)
        if not ok:
            raise RemoteError(*value)
        return value

    def _read(self, deadline: float) -> bytes:
        header = self._read_exactly(_HEADER.size, deadline)
        return self._read_exactly(_HEADER.unpack(header)[0], deadline)

    def _read_exactly(self, n: int, deadline: float) -> bytes:
        fd = self.proc.stdout.fileno()
        chunks, got = [], 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerFailed("timeout", "no reply in time")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, n - got)
            if not chunk:
                self.proc.wait()
                raise WorkerFailed("crash", f"the worker died (exit status {self.proc.returncode}); {self._tail()}")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _tail(self, lines: int = 3) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        tail = " | ".join(line.strip() for line in text[-lines:])
        return f"its log ends: {tail}" if tail else "its log is empty"

    def stop(self) -> None:
        """End the process (the next call starts a new one)."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
            self.proc = None

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def main() -> None:
    """The child: serve requests until stdin closes."""
    import importlib
    import traceback

    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what anything prints goes to the log, not into the protocol
    sys.stdout = sys.stderr
    while True:
        header = requests.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return
        function, args = pickle.loads(requests.read(_HEADER.unpack(header)[0]))
        module, _, name = function.partition(":")
        try:
            reply = (True, getattr(importlib.import_module(module), name)(*args))
        except Exception as e:
            reply = (False, (type(e).__name__, str(e), traceback.format_exc(limit=-8)))
        payload = pickle.dumps(reply)
        replies.write(_HEADER.pack(len(payload)) + payload)
        replies.flush()


if __name__ == "__main__":
    main()
