"""Passes that lower the kernel dialect to the cuda dialect."""
