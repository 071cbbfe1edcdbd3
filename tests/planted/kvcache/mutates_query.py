"""Planted bug: the query is scaled in place (``q.mul_(scale)``) before attending: only the two
caches may be written by attention_with_kvcache, every other input must come back unmodified.

Real pattern: the in-place ``query *= scale`` of hand-written attention (as in
tests/planted/attention/inplace_query_scale.py) carried over into a decode kernel; the caller's
query (often a view into a fused QKV projection) is corrupted. Caught by: kvcache.decode (an
implementation error: the call modified argument 0 in place).
Message: implementation error
Message: modified its input in place (argument 0)
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def attend(self, q, keys, vals, visible, scale):
        q.mul_(q.shape[-1] ** -0.5 if scale is None else scale)  # BUG: scales the caller's query in place
        return super().attend(q, keys, vals, visible, 1.0)


attention_with_kvcache = Planted().attention_with_kvcache
