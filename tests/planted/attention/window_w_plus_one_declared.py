"""Not a bug: the w + 1 window of window_w_plus_one.py, declared as the named
convention. sliding_window.window_extent must PASS and record convention:w+1.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from window_w_plus_one import Planted  # noqa: E402

HARNESS_CONVENTIONS = {"window_extent": "w+1"}


sliding_window_attention = Planted().sliding_window_attention
