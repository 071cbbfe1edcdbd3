"""transformers 4.38.2's Llama rotary modules as ``ScaledRotaryEmbedding``: ``LlamaRotaryEmbedding`` (plain),
``LlamaLinearScalingRotaryEmbedding`` (``linear``) and ``LlamaDynamicNTKScalingRotaryEmbedding``
(``dynamic``), with its ``apply_rotary_pos_emb``. A release with a known bug: not a control.

    pip install --target /tmp/libs/tf-4.38.2 --no-deps transformers==4.38.2

The classes are executed from the release's ``models/llama/modeling_llama.py`` as they are (the package
itself is not imported) and built as 4.38.2's ``LlamaAttention._init_rope`` builds them:
``Cls(head_dim, max_position_embeddings=<the original length>, scaling_factor=factor, base=rope_theta)``.
The bug: its dynamic module recomputes ``inv_freq`` only when ``max(position_ids) + 1`` exceeds the
original length and never restores it, so after a long prompt every shorter one keeps the last
grown base (later releases reset below the original length: ``dynamic_rope_update`` in current ones,
``harness.adapters.hf_scaled_rope`` on 5.24).
``scaled_rope_module.call_sequences`` finds it: a long call, then one shorter than the original
length, which a fresh instance gets right. Past the original length the base follows each call
(``dynamic_update`` per_call, measured). yarn, llama3, longrope and partial rotary dims did not
exist in 4.38.2's Llama: NotImplementedError (unsupported).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from harness.adapters.releases import load_definitions, require

VERSION = "4.38.2"
__version__ = VERSION
HARNESS_CONVENTIONS = {"rope_layout": "rotate_half", "dynamic_update": "per_call"}
#: the angles are float32 whatever x's dtype (4.38.2 forces float32): no float64 claim
HARNESS_DTYPES = ("float32", "float16", "bfloat16")


class _Logger:
    def warning_once(self, *args, **kwargs):
        pass


_PATH = require(f"tf-{VERSION}", "transformers", VERSION, "transformers/models/llama/modeling_llama.py")
_NS = load_definitions(_PATH, ("LlamaRotaryEmbedding", "LlamaLinearScalingRotaryEmbedding",
                               "LlamaDynamicNTKScalingRotaryEmbedding", "rotate_half", "apply_rotary_pos_emb"),
                       {"torch": torch, "nn": nn, "math": math, "logger": _Logger(), "__name__": __name__})
_CLASSES = {"default": _NS["LlamaRotaryEmbedding"], "linear": _NS["LlamaLinearScalingRotaryEmbedding"],
            "dynamic": _NS["LlamaDynamicNTKScalingRotaryEmbedding"]}


class ScaledRotaryEmbedding(nn.Module):
    """4.38.2's rotary module for the rule, and its apply."""

    def __init__(self, dim, base=10000.0, scaling=None):
        super().__init__()
        scaling = scaling or {}
        rule = scaling.get("rope_type", "default")
        if float(scaling.get("partial_rotary_factor", 1.0)) != 1.0:
            raise NotImplementedError("4.38.2's Llama rotates the whole head (no partial_rotary_factor)")
        if rule not in _CLASSES:
            raise NotImplementedError(f"transformers 4.38.2's Llama has no {rule!r} RoPE scaling")
        orig = int(scaling.get("original_max_position_embeddings") or 2048)
        self.rotary = _CLASSES[rule](dim, max_position_embeddings=orig, base=base,
                                     scaling_factor=float(scaling.get("factor", 1.0)))

    def forward(self, x, positions):
        position_ids = positions.to(x.device)[None].expand(x.shape[0], -1)
        cos, sin = self.rotary(x, position_ids)
        q, _ = _NS["apply_rotary_pos_emb"](x, x, cos, sin)
        return q
