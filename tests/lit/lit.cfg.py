# lit configuration for irforge's FileCheck tests: one folder per pass (tests/lit/<pass>/), one for each tool. The
# test dialect and passes are a plugin in tests/plugins, on the path of every tool the tests run.
import os
import sys

import irforge.testing

irforge.testing.lit_config(config)
config.test_source_root = os.path.dirname(__file__)
plugins = os.path.join(os.path.dirname(config.test_source_root), "plugins")
config.environment["PYTHONPATH"] = os.pathsep.join(filter(None, [plugins, config.environment.get("PYTHONPATH")]))
# `irforge compile` replays the tuning database when it exists: the tests see none (a RUN line may name one)
config.environment["IRFORGE_TUNE_DB"] = os.path.join(config.test_source_root, "Output", "absent.sqlite")
config.substitutions.append(("%python", sys.executable))
