"""Planted bug: masked keys get a finite constant -1e4 added to their scores instead
of being excluded, so a masked key whose score is itself ~1e4 still wins the softmax.

Real pattern: BERT/GPT-2-era extended attention masks ``(1.0 - mask) * -10000.0``
(Hugging Face transformers before the switch to ``finfo.min``).
Caught by: attention.bool_mask (masked keys set to +-1e4 leak).
Message: changed the output
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def apply_visibility(self, scores, visible):
        return scores + (~visible).to(scores.dtype) * -1e4  # BUG: finite constant; should mask with -inf


scaled_dot_product_attention = Planted().scaled_dot_product_attention
