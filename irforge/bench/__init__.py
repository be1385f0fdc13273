"""Benchmarks: the suites as data (`seed84`, `llm`), the measurement harness, the compile cache that separates
compiling from timing, and the reports (JSON, markdown worst case first, PNG chart, merge, compare). The command
is `irforge bench` (`command.py`); the method is in `harness.py`.

This module imports nothing heavy: the CLI reads `SUITES` to build its arguments.
"""

SUITES = {"seed84": "irforge.bench.seed84", "llm": "irforge.bench.llm"}
COMPILE_MODE = "max-autotune-no-cudagraphs"  # torch.compile as the method times it
DEFAULT_PIPELINE = "torch-to-cuda"  # irforge's whole lowering, captured torch IR to cuda
