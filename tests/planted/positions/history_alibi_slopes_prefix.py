"""Planted bug: ``alibi_slopes`` computes the slopes once for the most heads seen so far and serves
a smaller head count the first H of them; get_slopes(H) is not a prefix of get_slopes(H') (the
geometric ratio is 2^(-8/H)). Each call alone, or in increasing head counts, is right.

Real pattern: ``self.slopes = get_slopes(max_heads)`` registered once as a buffer, sliced
``[:num_heads]`` for a pruned or smaller model: the cache of history_alibi_slopes_sliced.py,
behind the slopes function instead of the bias.
Caught by: history.alibi_slopes (a call with more heads, then the first call again).
Message: differs after the calls before it on the same target
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from history_alibi_slopes_sliced import Planted as SlicedTable  # noqa: E402


class Planted(SlicedTable):
    def alibi_slopes(self, num_heads):
        return self.head_slopes(num_heads).clone()  # BUG (inherited): a slice of another count's table


alibi_slopes = Planted().alibi_slopes
