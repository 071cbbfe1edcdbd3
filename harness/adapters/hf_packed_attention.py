"""Hugging Face transformers' masks for packed sequences (position ids that restart per document) as
``attention_varlen``: ``masking_utils.create_causal_mask`` / ``create_chunked_causal_mask`` (Llama 4's
``attention_chunk_size``), which detect the packing from ``position_ids`` (``find_packed_sequence_indices``)
and count positions within each document, then ``integrations.sdpa_attention.sdpa_attention_forward``.

    --impl harness.adapters.hf_packed_attention

As a model's forward calls them on one packed row: a Llama 4 text config (``attention_chunk_size``,
SDPA), ``inputs_embeds`` of the packed length, no attention mask, no cache, the mask always
materialised (``allow_is_causal_skip=False``). transformers packs causal self-attention only: non-causal
calls, sequences with fewer queries than keys, windows, softcap and sinks raise NotImplementedError
(unsupported, not failed); zero-length sequences are dropped before packing.
"""
from __future__ import annotations

import inspect
from types import SimpleNamespace

import torch
import transformers
from transformers import masking_utils
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.models.llama4.configuration_llama4 import Llama4TextConfig

__version__ = transformers.__version__

HARNESS_UNSUPPORTED = ["varlen_window", "softcap", "sinks", "backward", "autocast"]

#: the cache parameter's name: ``cache`` in transformers 5.x, ``past_key_values`` before
_CACHE = "cache" if "cache" in inspect.signature(masking_utils.create_causal_mask).parameters else "past_key_values"


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, window=None,
                     scale=None, softcap=None, sinks=None, chunk=None):
    if not causal or window is not None or softcap is not None or sinks is not None:
        raise NotImplementedError("transformers packs causal self-attention only, without window, softcap or sinks")
    if not torch.equal(cu_seqlens_q.cpu(), cu_seqlens_k.cpu()):
        raise NotImplementedError("transformers' packed masks need as many queries as keys per sequence")
    lengths = [n for n in torch.diff(cu_seqlens_q.cpu().long()).tolist() if n > 0]
    T, H, Hkv = q.shape[0], q.shape[1], k.shape[1]
    out = torch.zeros(T, H, v.shape[-1], dtype=q.dtype, device=q.device)
    if not lengths:
        return out
    total = sum(lengths)
    position_ids = torch.cat([torch.arange(n) for n in lengths])[None].to(q.device)
    # (the mask builders read the chunk size and the attention implementation only)
    config = Llama4TextConfig(attention_chunk_size=int(chunk) if chunk is not None else 8192)
    config._attn_implementation = "sdpa"
    build = masking_utils.create_chunked_causal_mask if chunk is not None else masking_utils.create_causal_mask
    embeds = torch.zeros(1, total, 1, dtype=q.dtype, device=q.device)
    mask = build(config=config, inputs_embeds=embeds, attention_mask=None, position_ids=position_ids,
                 allow_is_causal_skip=False, **{_CACHE: None})
    module = SimpleNamespace(is_causal=True, num_key_value_groups=H // Hkv, training=False)
    qq, kk, vv = (t[:total].transpose(0, 1)[None] for t in (q, k, v))  # (rows past cu_seqlens[-1]: zeros)
    o, _ = sdpa_attention_forward(module, qq, kk, vv, mask, dropout=0.0, scaling=scale)
    out[:total] = o[0]
    return out
