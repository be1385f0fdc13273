# lit configuration for irforge's FileCheck tests: one folder per pass (tests/lit/<pass>/), one for each tool.
import os

import irforge.testing

irforge.testing.lit_config(config)
config.test_source_root = os.path.dirname(__file__)
