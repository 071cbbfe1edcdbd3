"""Planted bug: every item's pages are read through the first item's block-table row.

Real pattern: a paged decode kernel that indexes the block table with the program's query-head
or sequence-block id instead of its batch index (or a table row pointer not advanced by the
table's stride), so item b reads item 0's pages: a page read through the wrong block-table row.
Writes go through the right row; only the reads are wrong, and a batch of one is right.
Caught by: kvcache.paged_agreement.
Message: a linear cache with the same logical contents
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def pages(self, table, b, num_blocks):
        return table[0].long()  # BUG: row 0 for every item


attention_with_kvcache = Planted().attention_with_kvcache
