"""Decompositions from the torch dialect to the tensor dialect: one pass per ATen op family (torch-to-tensor)."""
