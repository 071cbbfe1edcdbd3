"""Planted bug: ``mask_tokens`` keeps its selection-probability matrix per (shape, p) between calls
and zeroes the special positions in it in place, so the special positions of every earlier batch
of that shape stay unselectable: with a generator seeded alike, a batch masked again after other
batches gets another mask. Each call alone is right.

Real pattern: a data collator "optimised" to reuse a preallocated ``probability_matrix`` buffer
(Hugging Face's ``DataCollatorForLanguageModeling`` builds ``torch.full(labels.shape, p)`` afresh
and calls ``masked_fill_`` on that new tensor; reusing the buffer keeps every earlier fill).
Caught by: history.mask_tokens (batches of one shape with other special positions, then the first again).
Message: with a generator seeded alike
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mlm_base import Masking  # noqa: E402


class Planted(Masking):
    def __init__(self):
        self.buffers = {}

    def select(self, input_ids, special, p, g):
        prob = self.buffers.setdefault((tuple(input_ids.shape), p), torch.full(input_ids.shape, p))
        prob.masked_fill_(special, 0.0)  # BUG: in place on the kept buffer: earlier batches' zeros stay
        return torch.rand(input_ids.shape, generator=g) < prob


mask_tokens = Planted().mask_tokens
