"""Planted bug: the T5 bias module caches the bias VALUES of each (Lq, Lk), not only the bucket
indices, so after the learned table changes (an optimizer step) it returns the old table's bias.

Real pattern: memoising a position bias across forward calls (T5 passes ``position_bias`` from
layer to layer within one forward; keeping it past the forward keeps stale weights, and it also
cuts the table off from the gradient after the first call).
Caught by: t5_bias_module.call_sequences (the same call after a training step).
Message: the bias was cached after the table changed
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import CachedT5Bias  # noqa: E402


class Planted(CachedT5Bias):
    def forward(self, query_len, key_len):
        values = self.__dict__.setdefault("values", {})
        key = (query_len, key_len)
        if key not in values:  # BUG: the values depend on the table, which changes
            values[key] = super().forward(query_len, key_len).detach()
        return values[key]


T5RelativePositionBias = Planted
