"""A kernel author's attention whose speed a "change" sets: the reference attention made
``HARNESS_GATE_SLOWDOWN`` times slower, forward and backward (default 1: unchanged; see _slowed.py).

The baseline gate compares rows of the same target (its path is in the row key), so the missed-
regression runs of issue 25 store a baseline of this file at factor 1 and gate runs at 1.5 and 1.25
against it (scripts/gate_rates.sh)."""
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _slowed import names  # noqa: E402

globals().update(names(float(os.environ.get("HARNESS_GATE_SLOWDOWN", "1"))))
__all__ = ["scaled_dot_product_attention", "sliding_window_attention"]
