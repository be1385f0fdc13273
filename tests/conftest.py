"""Shared test setup: no test sees the developer's tuning database (`irforge compile` replays one when it exists)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _no_tuning_database(tmp_path_factory):
    os.environ["IRFORGE_TUNE_DB"] = str(tmp_path_factory.mktemp("tuning") / "absent.sqlite")
