"""transformers' ``DataCollatorForLanguageModeling`` masking exposed as ``mask_tokens``.

The library's own ``torch_mask_tokens`` does the work (transformers 5.x; 4.x has the
same method): Bernoulli(mlm_probability) selection of the non-special tokens, then
[MASK] with ``mask_replace_prob`` = 0.8, a random id from ``range(len(tokenizer))``
with ``random_replace_prob`` = 0.1 (rescaled to 0.5 of the rest), unchanged otherwise.

What the adapter supplies, without changing the library's math:
- a minimal tokenizer (``_Tokenizer``): ``mask_token``/``convert_tokens_to_ids`` give the
  protocol's ``mask_token_id``, ``len()`` its ``vocab_size`` (the range random ids are
  drawn from), ``get_special_tokens_mask`` marks nothing (the protocol's
  ``special_tokens_mask=None``). No vocabulary files, no hub access.
- the generator: the collator draws from its ``generator`` attribute, which it builds
  itself from ``seed=`` (``create_rng``: ``torch.Generator().manual_seed(seed)``); the
  adapter sets that attribute to the protocol's ``generator`` (None: the global torch
  RNG, as the collator without a seed).
- a copy of ``input_ids``: ``torch_mask_tokens`` writes into the tensor it is given.

Conventions: independent per-token selection (``mlm_selection: independent``).
"""
from __future__ import annotations

import transformers
from transformers import DataCollatorForLanguageModeling

__version__ = transformers.__version__
HARNESS_CONVENTIONS = {"mlm_selection": "independent"}


class _Tokenizer:
    """The attributes the collator reads from a tokenizer, nothing else."""

    mask_token = "[MASK]"
    pad_token_id = None
    is_fast = True

    def __init__(self, vocab_size: int, mask_token_id: int):
        self.vocab_size, self.mask_token_id = int(vocab_size), int(mask_token_id)

    def __len__(self) -> int:
        return self.vocab_size

    def convert_tokens_to_ids(self, token):
        if token != self.mask_token:
            raise KeyError(token)
        return self.mask_token_id

    def get_special_tokens_mask(self, ids, already_has_special_tokens=False):
        return [0] * len(ids)


def mask_tokens(input_ids, *, vocab_size, mask_token_id, special_tokens_mask=None, mlm_probability=0.15,
                generator=None):
    collator = DataCollatorForLanguageModeling(tokenizer=_Tokenizer(vocab_size, mask_token_id), mlm=True,
                                               mlm_probability=mlm_probability, return_tensors="pt")
    collator.generator = generator
    if special_tokens_mask is None:
        special_tokens_mask = input_ids.new_zeros(input_ids.shape, dtype=bool)
    return collator.torch_mask_tokens(input_ids.clone(), special_tokens_mask=special_tokens_mask.bool())
