"""Not a bug: a kernel without paged caches, softcap or sinks that declares so.

Its attention_with_kvcache raises NotImplementedError on a block_table, softcap or sinks; with
the three declared in HARNESS_UNSUPPORTED, the properties that need them are reported
unsupported (declared), never failed, and the linear decode still passes.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402

HARNESS_UNSUPPORTED = {"kvcache_paged", "softcap", "sinks"}


class Planted(KVCache):
    def attention_with_kvcache(self, *args, block_table=None, softcap=None, sinks=None, **kwargs):
        if block_table is not None or softcap is not None or sinks is not None:
            raise NotImplementedError("no paged cache, softcap or sinks in this kernel")
        return super().attention_with_kvcache(*args, **kwargs)


attention_with_kvcache = Planted().attention_with_kvcache
