"""Planted bug: ``chunk`` served by a sliding window of the chunk's size: a query late in a chunk is
right, one early in a chunk also sees the last keys of the previous chunk.

Real pattern: a varlen kernel with a window but no chunked mask that maps Llama 4's
``attention_chunk_size`` onto ``window_size``.
Caught by: varlen_chunked.other_chunks
Message: values of earlier chunks
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Varlen  # noqa: E402


class Planted(Varlen):
    def attention_varlen(self, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False,
                         window=None, scale=None, softcap=None, sinks=None, chunk=None):
        return super().attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                                        chunk if chunk is not None else window,  # BUG: a window of c keys
                                        scale, softcap, sinks)


attention_varlen = Planted().attention_varlen
