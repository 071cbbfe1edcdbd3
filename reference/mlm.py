"""BERT masked-language-model masking (Devlin et al. 2018; RoBERTa's dynamic masking).

    input_ids            (..., L) int64
    special_tokens_mask  (..., L) bool, True = never selected ([CLS], [SEP], [PAD], ...)
    -> inputs (..., L) int64, labels (..., L) int64

Every non-special token is selected independently with probability
``mlm_probability`` (the ``mlm_selection: independent`` convention, as
transformers' DataCollatorForLanguageModeling; Google's create_pretraining_data.py
selects exactly round(n * p) per sequence instead: ``fixed_count``). A selected
token becomes [MASK] with probability 0.8, a token drawn uniformly from the whole
vocabulary [0, vocab_size) with probability 0.1 (special ids included, as both
BERT's script and transformers do; it may equal the original), and stays itself
with probability 0.1. ``labels`` hold the original id at selected positions and
-100 (PyTorch's cross-entropy ignore_index) elsewhere.

All randomness comes from ``generator`` (a CPU ``torch.Generator``); None uses
torch's global RNG. Each call draws fresh masks (dynamic masking): the same
batch seen twice is masked differently.
"""
from __future__ import annotations

import torch

IGNORE_INDEX = -100
MASK_FRACTION, RANDOM_FRACTION = 0.8, 0.1  # of the selected tokens; the remaining 0.1 stay


def mask_tokens(input_ids, *, vocab_size, mask_token_id, special_tokens_mask=None,
                mlm_probability=0.15, generator=None):
    shape = input_ids.shape
    # selection: one uniform per token, independent of every other token
    selected = torch.rand(shape, generator=generator) < mlm_probability
    if special_tokens_mask is not None:
        selected &= ~special_tokens_mask.bool().cpu()
    # replacement: one uniform per token picks [MASK] / random / unchanged
    branch = torch.rand(shape, generator=generator)
    random_ids = torch.randint(vocab_size, shape, generator=generator)
    ids = input_ids.cpu()
    inputs = torch.where(selected & (branch < MASK_FRACTION), torch.tensor(mask_token_id), ids)
    use_random = selected & (branch >= MASK_FRACTION) & (branch < MASK_FRACTION + RANDOM_FRACTION)
    inputs = torch.where(use_random, random_ids, inputs)
    labels = torch.where(selected, ids, torch.tensor(IGNORE_INDEX))
    return inputs.to(input_ids.device), labels.to(input_ids.device)
