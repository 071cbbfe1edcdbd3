"""Planted bug: chunked attention over packed documents with the chunks counted from the packed row's
start (a global-index chunk mask combined with the document mask), not from each document's first
token: right only for the documents that start at a multiple of the chunk.

Real pattern: a chunked mask_mod written on the packed row's indices (``q_idx // chunk == kv_idx //
chunk``) and AND-ed with a document mask, where the documents' own positions were meant.
Caught by: varlen_chunked.agreement
Message: counted from the packed row's start
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Varlen  # noqa: E402


class Planted(Varlen):
    def chunk_of(self, positions, chunk, start):
        return (positions + start) // chunk  # BUG: the packed row's index, not the document's position


attention_varlen = Planted().attention_varlen
