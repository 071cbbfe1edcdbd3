"""Hugging Face transformers 4.38.2's Mistral sliding window, its two attention paths, as
``sliding_window_attention`` targets: ``hf_mistral_eager_window`` and ``hf_mistral_fa2_window``.
Run together, the consistency section reports that they disagree (HF issue 29623).

    pip install --target /tmp/libs/tf-4.38.2 --no-deps transformers==4.38.2

What is wrapped and what is emulated:

- eager (``MistralAttention``): WRAPPED. The 4D mask comes from 4.38.2's own
  ``AttentionMaskConverter._make_causal_mask(..., past_key_values_length=S - L,
  sliding_window=w)`` (``modeling_attn_mask_utils.py`` of the release, executed as is; the
  package itself is not imported), added to the scores q k^T / sqrt(head_dim), softmax in float32
  and cast back, as ``MistralAttention.forward`` does. The mask keeps i - w < j <= i: w keys.
- FlashAttention-2 (``MistralFlashAttention2``): EMULATED. flash_attn does not install without
  CUDA; 4.38.2 calls ``flash_attn_func(q, k, v, dropout, softmax_scale=None, causal=True,
  window_size=(sliding_window, sliding_window))`` when ``kv_seq_len > sliding_window`` (and no
  window otherwise). ``fa2_call`` reproduces that decision and ``flash_window_attention`` is an
  exact-window kernel with flash_attn's semantics (bottom-right causal; a key j is seen when
  i - left <= j <= i + right): w + 1 keys. The call is checked against the release's
  ``modeling_mistral.py`` text (``FA2_CALL``) when this module loads.
"""
from __future__ import annotations

import math

import torch

from harness.adapters.releases import load_definitions, require

VERSION = "4.38.2"
FOLDER = f"tf-{VERSION}"

#: the window argument 4.38.2's MistralFlashAttention2._flash_attention_forward passes flash_attn
FA2_CALL = "window_size=(self.config.sliding_window, self.config.sliding_window)"
#: and when: the sliding-window branch only runs for kv_seq_len > sliding_window
FA2_WHEN = "and kv_seq_len > self.config.sliding_window"


def mask_converter():
    """4.38.2's ``AttentionMaskConverter`` (from the release's modeling_attn_mask_utils.py)."""
    path = require(FOLDER, "transformers", VERSION, "transformers/modeling_attn_mask_utils.py")
    from dataclasses import dataclass
    from typing import List, Optional, Tuple, Union
    ns = load_definitions(path, ("AttentionMaskConverter",),
                          {"torch": torch, "dataclass": dataclass, "List": List, "Optional": Optional,
                           "Tuple": Tuple, "Union": Union, "__name__": __name__})  # (dataclass looks it up)
    return ns["AttentionMaskConverter"]


def check_fa2_source() -> None:
    """ImportError unless the release's Mistral FA2 path makes the call ``fa2_call`` emulates."""
    path = require(FOLDER, "transformers", VERSION, "transformers/models/mistral/modeling_mistral.py")
    text = path.read_text()
    for fragment in (FA2_CALL, FA2_WHEN):
        if fragment not in text:
            raise ImportError(f"{path} does not contain {fragment!r}: the emulation no longer matches it")


def eager_attention(query, key, value, window, scale=None, converter=None):
    """MistralAttention's math with 4.38.2's sliding-window causal mask. (B, H, L, E) -> (B, H, L, Ev)."""
    L, S = query.shape[-2], key.shape[-2]
    mask = converter._make_causal_mask((1, L), query.dtype, query.device, past_key_values_length=S - L,
                                       sliding_window=window)[0, 0]  # (L, S): 0 or finfo.min
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    weights = torch.matmul(query, key.transpose(-2, -1)) * scale + mask
    weights = torch.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(weights, value)


def flash_window_attention(query, key, value, causal, window_size, softmax_scale=None):
    """flash_attn_func's semantics on (B, H, L, E) tensors: queries aligned to the end of the keys
    (bottom-right, flash_attn >= 2.1); key j is seen by query i (position p = i + S - L) when
    p - left <= j <= p + right (and j <= p when causal); (-1, -1) is no window."""
    L, S = query.shape[-2], key.shape[-2]
    p = torch.arange(L, device=query.device)[:, None] + (S - L)
    j = torch.arange(S, device=query.device)[None, :]
    left, right = window_size
    seen = torch.ones(L, S, dtype=torch.bool, device=query.device)
    if left >= 0:
        seen &= j >= p - left
    if right >= 0:
        seen &= j <= p + right
    if causal:
        seen &= j <= p
    scale = 1 / math.sqrt(query.shape[-1]) if softmax_scale is None else softmax_scale
    acc = torch.float64 if query.dtype == torch.float64 else torch.float32  # flash_attn: float32 accumulators
    scores = (query.to(acc) @ key.to(acc).transpose(-2, -1)) * scale
    weights = torch.softmax(scores.masked_fill(~seen, float("-inf")), dim=-1)
    return (weights @ value.to(acc)).to(query.dtype)


def fa2_call(query, key, value, window, scale=None):
    """What 4.38.2's MistralFlashAttention2 asks flash_attn for, on the emulated kernel."""
    if key.shape[-2] > window:  # use_sliding_windows
        return flash_window_attention(query, key, value, True, (window, window), scale)
    return flash_window_attention(query, key, value, True, (-1, -1), scale)
