"""Irforge's tests see the test dialect and passes (tests/plugins): a plugin on the path, found by its entry points,
in this process and in every process it starts (irforge-opt, lit). No test sees the developer's tuning database
(`irforge compile` replays one when it exists)."""

import os
import sys
from pathlib import Path

import pytest

PLUGINS = str(Path(__file__).parent / "plugins")
sys.path.insert(0, PLUGINS)
os.environ["PYTHONPATH"] = os.pathsep.join([PLUGINS, *filter(None, [os.environ.get("PYTHONPATH")])])


@pytest.fixture(autouse=True, scope="session")
def _no_tuning_database(tmp_path_factory):
    os.environ["IRFORGE_TUNE_DB"] = str(tmp_path_factory.mktemp("tuning") / "absent.sqlite")


def pytest_collection_modifyitems(items):
    # The long tests first: with the tests spread over workers, a long one started last is the whole run's tail.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
