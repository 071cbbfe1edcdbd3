"""Planted bug: exactly round(N p) tokens per batch, undeclared.

Real pattern: ``randperm`` over all non-special positions of the batch, first round(N p) taken:
each batch has the same count, rows are no longer independent (a per-batch fixed count).
Caught by: mlm.independence.
Message: mlm_selection: the code follows fixed_count
Message: batches
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import torch  # noqa: E402

from _mlm_base import Masking  # noqa: E402


class Planted(Masking):
    def select(self, input_ids, special, p, g):
        words = (~special).flatten()
        k = round(int(words.sum()) * p)
        order = torch.randperm(words.numel(), generator=g)
        chosen_idx = order[words[order]][:k]  # BUG: a fixed number of tokens per batch
        chosen = torch.zeros(words.numel(), dtype=torch.bool)
        chosen[chosen_idx] = True
        return chosen.reshape(special.shape)


mask_tokens = Planted().mask_tokens
