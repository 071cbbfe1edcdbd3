"""Planted bug: the stateful rotary module's cos/sin table stays in the dtype of the call that
built it; a later call in another dtype gets that table cast, e.g. bfloat16 cos/sin for float32 x.

Real pattern: rotary caches keyed on the length alone (Hugging Face's rotary modules before
4.38 rebuilt ``cos_cached`` only when ``seq_len > self.max_seq_len_cached`` and returned
``cos_cached[:seq_len].to(dtype=x.dtype)``, whatever dtype the cache was built in).
Caught by: rope_module.call_sequences (the same call in another dtype).
Message: on a fresh instance the same call is right
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import CachedRotary  # noqa: E402


class Planted(CachedRotary):
    def key(self, x):
        return x.device  # BUG: the dtype is not part of the key


RotaryEmbedding = Planted
