"""Passes on the tile level: the GPU schedule (docs/dialects/tile.md)."""
