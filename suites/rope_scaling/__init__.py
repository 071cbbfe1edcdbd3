"""Scaled RoPE (context extension): the frequencies of every scaling rule, ``rope_frequencies``, and the
stateful rotary module built with one, ``ScaledRotaryEmbedding``."""
