"""A model compile job in a process of its own (`python -m irforge.models.worker`): a pickled job on stdin, the
pickled result (or the `IRForgeError` it raised) on stdout. A fresh interpreter, not a fork (torch's threads) nor
multiprocessing's spawn (which re-runs the caller's main module)."""

from __future__ import annotations

import pickle
import sys


def main() -> None:
    from irforge.diagnostics import IRForgeError

    from . import _compile_step

    job = pickle.load(sys.stdin.buffer)
    try:
        result = (True, _compile_step(*job))
    except IRForgeError as e:
        result = (False, e)
    pickle.dump(result, sys.stdout.buffer)


if __name__ == "__main__":
    main()
