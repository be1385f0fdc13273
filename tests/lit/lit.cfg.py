# lit configuration for irforge's FileCheck tests: one folder per pass (tests/lit/<pass>/), one for each tool.
import os
import shutil
import sys

import lit.formats

config.name = "irforge"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".ir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)

# The venv whose tools we test: IRFORGE_BIN when the caller names one (pytest does), else the venv running lit.
bin_dirs = [d for d in (os.environ.get("IRFORGE_BIN"), os.path.dirname(sys.executable)) if d]
config.environment["PATH"] = os.pathsep.join([*bin_dirs, os.environ.get("PATH", "")])
config.environment["PYTHONUNBUFFERED"] = "1"
for var in ("HOME", "TMPDIR", "IRFORGE_CACHE_DIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
# `irforge compile` replays the tuning database when it exists: the tests see none (a RUN line may name one)
config.environment["IRFORGE_TUNE_DB"] = os.path.join(os.path.dirname(__file__), "Output", "absent.sqlite")
config.substitutions.append(("%python", sys.executable))


# Whole-word substitutions (lit applies them as regular expressions), so paths containing the names are untouched.
for tool in ("irforge-opt", "irforge", "filecheck"):
    path = shutil.which(tool, path=config.environment["PATH"])
    if path is None and tool != "irforge":
        lit_config.fatal(f"cannot find '{tool}' on {config.environment['PATH']}; install irforge with '.[dev]'")
    if path is not None:
        config.substitutions.append((rf"(?<![\w/.%-]){tool}(?![\w/.-])", path))
