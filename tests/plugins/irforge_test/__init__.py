"""The `test` dialect and the test passes: irforge's tests use them to exercise the framework itself.

They are a plugin, registered through entry points like any other (`irforge_test-0.1.dist-info/entry_points.txt`
beside this package): `tests/conftest.py` and `tests/lit/lit.cfg.py` put this folder on the path, so irforge's tests
see them and nothing else does (`--list-passes`, the docs).
"""
