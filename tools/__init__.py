"""Command-line tools: irforge-opt and irforge (installed as `irforge.tools`)."""
