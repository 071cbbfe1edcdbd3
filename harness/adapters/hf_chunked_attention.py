"""Hugging Face transformers' chunked attention path (Llama 4's ``attention_chunk_size``) as
``chunked_attention``: the mask ``masking_utils.create_chunked_causal_mask`` builds for the SDPA
implementation, ``sdpa_mask(..., mask_function=chunked_causal_mask_function(chunk, left_padding))``,
and ``integrations.sdpa_attention.sdpa_attention_forward``, which a chunked layer of Llama 4 calls with it.

    --impl harness.adapters.hf_chunked_attention

As the model calls them: queries at cache positions S - L .. S - 1 (``q_offset``: a decoding step
after a prompt), no left padding, ``local_size=chunk``; the mask is always materialised
(``allow_is_causal_skip=False``: with one chunk the skip would hand SDPA ``is_causal`` instead, the
same keys). Batch dims are flattened to the model's one. ``sdpa_attention_forward`` returns
(B, L, H, Ev); the adapter transposes it back to the protocol's (B, H, L, Ev).
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import torch
import transformers
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import chunked_causal_mask_function, sdpa_mask

__version__ = transformers.__version__

#: a chunked layer's attention module as sdpa_attention_forward reads it (causal, one KV group)
_MODULE = SimpleNamespace(is_causal=True, num_key_value_groups=1, training=False)


def chunked_attention(query, key, value, chunk, scale=None):
    *batch, H, L, E = query.shape
    S, Ev = key.shape[-2], value.shape[-1]
    B = math.prod(batch)
    mask = sdpa_mask(batch_size=B, q_length=L, kv_length=S, q_offset=S - L,
                     mask_function=chunked_causal_mask_function(int(chunk), torch.zeros(B, dtype=torch.long)),
                     local_size=int(chunk), allow_is_causal_skip=False, device=query.device)
    q, k, v = (t.reshape(B, H, t.shape[-2], t.shape[-1]) for t in (query, key, value))
    out, _ = sdpa_attention_forward(_MODULE, q, k, v, mask, dropout=0.0, scaling=scale)
    return out.transpose(1, 2).reshape(*batch, H, L, Ev)
