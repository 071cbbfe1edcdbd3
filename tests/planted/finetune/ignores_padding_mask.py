"""Planted bug: scaled dot-product attention that ignores ``attn_mask`` (the padding mask).

Real pattern: a wrapper around a fused kernel that supports only ``is_causal`` (no arbitrary
mask) and silently drops ``attn_mask`` instead of raising, so in a padded batch every token,
[CLS] included, also attends to the [PAD] positions. Correct on unpadded input, so a
same-length smoke test passes; fine-tuning BERT on variable-length batches shows it
(``harness.bench.finetune`` case ``swap.sdpa``: a clear accuracy drop; the conformance suites
catch it too, e.g. attention.bool_mask).
"""
import torch.nn.functional as F

HARNESS_CONVENTIONS = {"causal_alignment": "top_left"}


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    return F.scaled_dot_product_attention(query, key, value, attn_mask=None,  # BUG: mask dropped
                                          dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                                          enable_gqa=enable_gqa)
