"""Planted bug: special tokens can be selected ([CLS], [SEP], [PAD] masked and predicted).

Real pattern: ``special_tokens_mask`` not passed on / ignored (the collator then asks a
tokenizer that marks nothing), so padding and separators are masked. Caught by:
mlm.special_tokens.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import torch  # noqa: E402

from _mlm_base import Masking  # noqa: E402


class Planted(Masking):
    def select(self, input_ids, special, p, g):
        return torch.rand(input_ids.shape, generator=g) < p  # BUG: special ignored


mask_tokens = Planted().mask_tokens
