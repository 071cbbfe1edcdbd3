"""Planted bug: the T5 bias module caches bucket indices under the key length only and slices the
first ``Lq`` rows, so a call with fewer queries over the same keys reads the first queries' buckets
(after a prefill of 10, a decoding call (1, 10) gets position 0's biases, not 9's).

Real pattern: the same slice x-transformers' ALiBi cache had up to 1.22.16 (``[..., :i, :j]``),
applied to a bucket cache keyed on the sequence length.
Caught by: t5_bias_module.call_sequences (fewer queries over the same keys).
Message: on a fresh instance the same call is right
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import CachedT5Bias  # noqa: E402


class Planted(CachedT5Bias):
    def lookup(self, query_len, key_len, device):
        key = (key_len, device)  # BUG: the query count is not in the key ...
        if key not in self.buckets or self.buckets[key].shape[0] < query_len:
            self.buckets[key] = self.bucket_grid(query_len, key_len, device)
        return self.buckets[key][:query_len]  # ... and the first rows are taken


T5RelativePositionBias = Planted
