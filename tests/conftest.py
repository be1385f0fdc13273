"""Irforge's tests see the test dialect and passes (tests/plugins): a plugin on the path, found by its entry points,
in this process and in every process it starts (irforge-opt, lit)."""

import os
import sys
from pathlib import Path

PLUGINS = str(Path(__file__).parent / "plugins")
sys.path.insert(0, PLUGINS)
os.environ["PYTHONPATH"] = os.pathsep.join([PLUGINS, *filter(None, [os.environ.get("PYTHONPATH")])])
