"""Passes for testing the framework: they change, fail or crash on purpose."""
