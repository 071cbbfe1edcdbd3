"""Scaled RoPE (context extension): the frequencies of every scaling rule, ``rope_frequencies``."""
