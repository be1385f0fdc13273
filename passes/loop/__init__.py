"""Passes on the loop level: fusion, and the cleanups that keep kernels canonical."""
