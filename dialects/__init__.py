"""The six levels' dialects, one package each (installed as `irforge.dialects`)."""
