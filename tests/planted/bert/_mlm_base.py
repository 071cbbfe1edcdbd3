"""A correct MLM masking (``mask_tokens``), split into hooks.

Every planted MLM bug in this folder subclasses ``Masking``, overrides ONE hook
with a real-world mistake, and exports the bound method::

    import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from _mlm_base import Masking

    class Planted(Masking):
        def branch_thresholds(self):
            return 0.7, 0.9                      # BUG: 70/20/10

    mask_tokens = Planted().mask_tokens

Unmodified it passes every ``mlm.*`` property: independent Bernoulli selection of
the non-special tokens, then 80/10/10 [MASK]/random/unchanged from one uniform
per token, labels -100 off the selection, everything drawn from ``generator``.
"""
from __future__ import annotations

import torch

IGNORE = -100


class Masking:
    def rng(self, generator):
        """The random source every draw uses."""
        return generator

    def rate(self, mlm_probability: float) -> float:
        return mlm_probability

    def select(self, input_ids, special, p, g):
        """(..., L) bool: each non-special token independently with probability p."""
        chosen = torch.rand(input_ids.shape, generator=g) < p
        return chosen & ~special

    def branch_thresholds(self) -> tuple[float, float]:
        """u < a: [MASK]; a <= u < b: random; else unchanged."""
        return 0.8, 0.9

    def branches(self, selected, g):
        a, b = self.branch_thresholds()
        u = torch.rand(selected.shape, generator=g)
        return selected & (u < a), selected & (u >= a) & (u < b)

    def random_ids(self, shape, vocab_size, g):
        return torch.randint(vocab_size, shape, generator=g)

    def labels(self, input_ids, selected):
        return torch.where(selected, input_ids, torch.tensor(IGNORE))

    def mask_tokens(self, input_ids, *, vocab_size, mask_token_id, special_tokens_mask=None,
                    mlm_probability=0.15, generator=None):
        g = self.rng(generator)
        special = (torch.zeros_like(input_ids, dtype=torch.bool) if special_tokens_mask is None
                   else special_tokens_mask.bool())
        selected = self.select(input_ids, special, self.rate(mlm_probability), g)
        to_mask, to_random = self.branches(selected, g)
        inputs = input_ids.clone()
        inputs[to_mask] = mask_token_id
        inputs[to_random] = self.random_ids(input_ids.shape, vocab_size, g)[to_random]
        return inputs, self.labels(input_ids, selected)


mask_tokens = Masking().mask_tokens
