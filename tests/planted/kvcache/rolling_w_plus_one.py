"""Planted bug (a convention mismatch): the rolling window keeps w + 1 keys (the query and the
w before it) and the target declares nothing.

Real pattern: FlashAttention's ``window_size=(w, 0)`` sees w + 1 keys; a decoder that passes the
model's ``sliding_window`` straight through (instead of ``sliding_window - 1``) attends one key
more than the model was trained with. Caught by: kvcache.rolling_window.
The same code declared (rolling_w_plus_one_declared.py) passes.
Message: convention mismatch
Message: window_extent: the code follows w+1
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def reach(self, window):
        return window + 1  # BUG (undeclared): w + 1 keys


attention_with_kvcache = Planted().attention_with_kvcache
