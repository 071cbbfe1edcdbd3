"""Planted bug: exactly round(n p) tokens per row, undeclared.

Real pattern: Google's create_pretraining_data.py selects a fixed count per sequence (a
legitimate convention, ``mlm_selection: fixed_count``); code that does so while claiming the
independent scheme of transformers' collator is reported. Caught by: mlm.independence.
Message: convention mismatch
Message: mlm_selection: the code follows fixed_count
Message: HARNESS_CONVENTIONS
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import torch  # noqa: E402

from _mlm_base import Masking  # noqa: E402


class Planted(Masking):
    def select(self, input_ids, special, p, g):
        words = ~special.reshape(-1, special.shape[-1])
        scores = torch.rand(words.shape, generator=g).masked_fill(~words, 2.0)
        k = (words.sum(-1, keepdim=True) * p).round().long()
        rank = scores.argsort(-1).argsort(-1)
        return (rank < k).reshape(special.shape) & ~special  # BUG (undeclared): fixed count per row


mask_tokens = Planted().mask_tokens
