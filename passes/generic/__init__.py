"""Level-agnostic passes: they work on any op that declares itself `pure`."""
