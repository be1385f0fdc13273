"""`irforge tune`: search the schedule passes' own options per kernel, on the GPU, and remember the winners."""
