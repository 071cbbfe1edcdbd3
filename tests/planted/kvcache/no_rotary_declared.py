"""Not a bug: a kernel without RoPE inside (the tables raise NotImplementedError) that declares
it: ``HARNESS_UNSUPPORTED = {"kvcache_rotary"}``. kvcache.rotary is reported unsupported
(declared), the other kvcache properties pass.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402

HARNESS_UNSUPPORTED = {"kvcache_rotary"}


class Planted(KVCache):
    def rotate(self, x, pos, cos, sin, interleaved):
        raise NotImplementedError("rotary tables are not supported by this kernel")


attention_with_kvcache = Planted().attention_with_kvcache
