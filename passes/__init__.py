"""Passes, one file each, grouped by what they work on (installed as `irforge.passes`)."""
