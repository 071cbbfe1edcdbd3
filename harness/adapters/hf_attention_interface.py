"""Run Hugging Face models on a target's attention kernel.

transformers (>= 4.48, 5.x) dispatches attention through ``AttentionInterface``:
a model built with ``attn_implementation=NAME`` calls ``fn(module, query, key,
value, attention_mask, scaling=..., dropout=..., **kwargs)`` with
query (B, H, L, E), key/value (B, Hkv, S, E) and expects ``(output (B, L, H, E), weights or None)``.

``register_target_attention(sdpa)`` registers such an ``fn`` around a target's
``scaled_dot_product_attention`` (the protocol signature) under ``NAME`` and a mask
function under the same name in ``AttentionMaskInterface``. A custom name that has no
mask function gets ``attention_mask=None`` from transformers (it assumes the kernel
masks by itself), so we register ``sdpa_mask`` with the "is_causal skip" turned off:
the target always receives an explicit boolean mask (True = may attend), causal and
sliding-window alike, with the queries aligned to the end of the keys during decoding.

GQA: by default K/V are expanded to the query heads (``repeat_kv``, as HF's eager
attention does), so any SDPA works; ``gqa="enable_gqa"`` passes ``enable_gqa=True``
to exercise the target's own GQA path instead.

Usage::

    name = register_target_attention(target.lookup("scaled_dot_product_attention"))
    model = LlamaForCausalLM(LlamaConfig(..., attn_implementation=name))
"""
from __future__ import annotations

from typing import Callable

import torch

DEFAULT_NAME = "harness_target"


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, Hkv, S, E) -> (B, Hkv * n_rep, S, E), head h reads KV head h // n_rep."""
    if n_rep == 1:
        return x
    B, Hkv, S, E = x.shape
    return x[:, :, None].expand(B, Hkv, n_rep, S, E).reshape(B, Hkv * n_rep, S, E)


def make_attention_forward(sdpa: Callable, gqa: str = "repeat") -> Callable:
    """The ``AttentionInterface`` function that calls ``sdpa`` (protocol signature)."""
    if gqa not in ("repeat", "enable_gqa"):
        raise ValueError(f"gqa must be 'repeat' or 'enable_gqa', got {gqa!r}")

    def harness_attention_forward(module, query, key, value, attention_mask, scaling=None,
                                  dropout=0.0, **kwargs):
        hq, hkv = query.shape[1], key.shape[1]
        extra = {}
        if hq != hkv:
            if gqa == "repeat":
                key, value = repeat_kv(key, hq // hkv), repeat_kv(value, hq // hkv)
            else:
                extra["enable_gqa"] = True
        is_causal = False
        mask = attention_mask
        if mask is None:  # only if someone bypassed our mask function
            is_causal = bool(getattr(module, "is_causal", True)) and query.shape[2] > 1 \
                and query.shape[2] == key.shape[2]
        elif mask.dtype == torch.bool and mask.shape[-1] != key.shape[2]:
            mask = mask[..., : key.shape[2]]
        if dropout and module is not None and not module.training:
            dropout = 0.0
        out = sdpa(query, key, value, attn_mask=mask, dropout_p=dropout, is_causal=is_causal,
                   scale=scaling, **extra)  # (B, H, L, E)
        return out.transpose(1, 2).contiguous(), None

    harness_attention_forward.__name__ = f"harness_attention_forward[{getattr(sdpa, '__name__', sdpa)}]"
    return harness_attention_forward


def _bool_mask(*args, **kwargs):
    from transformers.masking_utils import sdpa_mask
    kwargs["allow_is_causal_skip"] = False
    return sdpa_mask(*args, **kwargs)


def register_target_attention(sdpa: Callable, name: str = DEFAULT_NAME, gqa: str = "repeat") -> str:
    """Register ``sdpa`` as HF attention implementation ``name``; returns ``name``.

    Re-registering a name replaces the previous function (one target per name).
    """
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(name, make_attention_forward(sdpa, gqa))
    AttentionMaskInterface.register(name, _bool_mask)
    return name


def hf_available() -> str | None:
    """None when transformers with ``AttentionInterface`` imports, else why not."""
    try:
        from transformers import AttentionInterface  # noqa: F401
        from transformers.masking_utils import AttentionMaskInterface  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        from harness.basics import extras
        if extras.missing_module(exc) == "transformers":  # not installed: the extra that installs it
            return extras.missing_line("transformers")
        return f"transformers with AttentionInterface is not available: {type(exc).__name__}: {exc}"
    return None
