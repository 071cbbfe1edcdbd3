"""Hugging Face transformers' rotary module with a scaling rule as ``ScaledRotaryEmbedding``: GPT-NeoX's
``GPTNeoXRotaryEmbedding`` (``dynamic_rope_update`` included) and its ``apply_rotary_pos_emb``.

    --impl harness.adapters.hf_scaled_rope

As a model runs it: the module is built once from the model config (a ``GPTNeoXConfig`` whose
``rope_parameters`` carry the protocol's ``scaling``, ``rope_theta`` = base, head dim = dim; the config's
``max_position_embeddings`` as ``hf_rope_scaling.config_for`` sets it), ``forward(x, position_ids)``
returns cos and sin (attention factor applied) and ``apply_rotary_pos_emb(q, k, cos, sin)`` rotates
the first ``int(head_dim * partial_rotary_factor)`` dims of q and passes the rest through (GPT-NeoX
is the model family whose apply takes a partial rotary dim). GPT-NeoX's config defaults
``partial_rotary_factor`` to 0.25; the protocol's default is 1, so the adapter passes 1 unless
``scaling`` names one.

Named conventions: pairs (i, i + R/2) (``rope_layout`` rotate_half); the dynamic rule's base grows
with the longest ``max(position_ids) + 1`` seen and goes back to the original only when a call is
shorter than the original length (``dynamic_update`` grow_until_reset). The angles are computed in
float32 whatever x's dtype, so float64 is not declared.
"""
from __future__ import annotations

import logging

import torch
import transformers
from transformers import GPTNeoXConfig
from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding, apply_rotary_pos_emb

from harness.adapters.hf_rope_scaling import config_for

__version__ = transformers.__version__
HARNESS_CONVENTIONS = {"rope_layout": "rotate_half", "dynamic_update": "grow_until_reset"}
HARNESS_DTYPES = ("float32", "float16", "bfloat16")

for _name in ("transformers.modeling_rope_utils", "transformers.configuration_utils"):
    logging.getLogger(_name).setLevel(logging.ERROR)


class ScaledRotaryEmbedding(torch.nn.Module):
    """GPT-NeoX's rotary embedding and apply, one model config per instance."""

    def __init__(self, dim, base=10000.0, scaling=None):
        super().__init__()
        scaling = {"partial_rotary_factor": 1.0, **(scaling or {})}
        self.rotary = GPTNeoXRotaryEmbedding(config_for(dim, base, scaling, config_cls=GPTNeoXConfig))

    def forward(self, x, positions):
        position_ids = positions.to(x.device)[None].expand(x.shape[0], -1)
        cos, sin = self.rotary(x, position_ids)
        q, _ = apply_rotary_pos_emb(x, x, cos, sin)
        return q
