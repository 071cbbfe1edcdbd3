"""Planted bug: selected tokens come in adjacent pairs (span masking, undeclared).

Real pattern: whole-word / span masking (SpanBERT-style) used where BERT's token-level
masking is claimed: the rate can be right while tokens are no longer selected independently.
Caught by: mlm.independence.
Message: matches no known convention
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import torch  # noqa: E402

from _mlm_base import Masking  # noqa: E402


class Planted(Masking):
    def select(self, input_ids, special, p, g):
        start = torch.rand(input_ids.shape, generator=g) < p / 2
        pair = start | torch.roll(start, 1, dims=-1)  # BUG: the next token goes with it
        return pair & ~special


mask_tokens = Planted().mask_tokens
