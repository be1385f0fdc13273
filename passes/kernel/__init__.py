"""Passes on the kernel dialect: what a kernel does around its schedule (how it is launched)."""
