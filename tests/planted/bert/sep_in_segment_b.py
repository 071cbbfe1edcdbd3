"""Planted bug: the [SEP] that closes sentence A is given segment 1.

Real pattern: segment ids computed as "1 after the first [SEP] token *inclusive*" (e.g.
``cumsum(ids == sep_id) > 0``), which puts A's separator in segment B. Caught by:
models.special_placement.
"""
import torch

from harness.reference.bert import CLS_ID, SEP_ID


def build_inputs(tokens_a, tokens_b=None, *, cls_id=CLS_ID, sep_id=SEP_ID):
    ids = [cls_id, *tokens_a, sep_id] + ([*tokens_b, sep_id] if tokens_b is not None else [])
    ids_t = torch.tensor(ids, dtype=torch.long)
    types = (ids_t == sep_id).long().cumsum(0).clamp(max=1)  # BUG: first [SEP] already segment 1
    if tokens_b is None:
        types = torch.zeros_like(ids_t)
    return ids_t, types
