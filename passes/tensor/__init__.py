"""Passes on the tensor level: cleanups that keep the IR small for the loop level."""
