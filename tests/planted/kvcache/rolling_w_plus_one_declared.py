"""Not a bug: the w + 1 rolling window of rolling_w_plus_one.py, declared as the named
convention. kvcache.rolling_window must PASS and record convention:w+1.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from rolling_w_plus_one import Planted  # noqa: E402

HARNESS_CONVENTIONS = {"window_extent": "w+1"}

attention_with_kvcache = Planted().attention_with_kvcache
