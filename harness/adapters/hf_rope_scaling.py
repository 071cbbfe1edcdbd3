"""Hugging Face transformers' scaled-RoPE initializers (``modeling_rope_utils.ROPE_INIT_FUNCTIONS``) as
``rope_frequencies``.

    --impl harness.adapters.hf_rope_scaling

``ROPE_INIT_FUNCTIONS[rope_type](config, device, seq_len)`` is what every transformers model's rotary
embedding calls (at init, and the dynamic rule again at each longer sequence through
``dynamic_rope_update``) to get ``(inv_freq, attention_factor)``. It is called here as a model calls
it, with a model config (``LlamaConfig``) carrying the protocol's ``scaling`` dict as its
``rope_parameters`` (``rope_theta`` = base, ``head_dim`` = dim). What is the adapter's: the config's
``max_position_embeddings``, which transformers' dynamic rule reads as the pretraining length (the
protocol's ``original_max_position_embeddings``) and the other rules as the extended length
(``scaling["max_position_embeddings"]`` when given, else ``factor`` times the original).

Plain RoPE (``scaling`` None or ``rope_type`` "default") is each model's own
``compute_default_rope_parameters``; Phi's is called, as it honours ``partial_rotary_factor`` (Llama's
has none). transformers computes the plain frequencies in float32 (``torch.arange(...).float()``), so float64
precision is not claimed: ``rope_frequencies`` is compared at float32's rounding.
"""
from __future__ import annotations

import logging

import transformers
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.phi.modeling_phi import PhiRotaryEmbedding

__version__ = transformers.__version__

# the config's validation warnings (e.g. a factor that is not max / original), once at import
for _name in ("transformers.modeling_rope_utils", "transformers.configuration_utils"):
    logging.getLogger(_name).setLevel(logging.ERROR)


def config_for(dim: int, base: float, scaling: dict | None, config_cls=LlamaConfig):
    """The model config (a ``config_cls``, one head of ``dim``) a transformers model would carry for ``scaling``."""
    params = {"rope_type": "default", **{k: v for k, v in (scaling or {}).items() if k != "max_position_embeddings"},
              "rope_theta": float(base)}
    orig = params.get("original_max_position_embeddings")
    if params["rope_type"] == "dynamic" or orig is None:
        max_pos = orig or 2048
    else:
        max_pos = (scaling or {}).get("max_position_embeddings") or int(round(float(params["factor"]) * orig))
    head = {"head_dim": dim} if config_cls is LlamaConfig else {}
    return config_cls(**head, hidden_size=dim, num_attention_heads=1, rope_parameters=params,
                      max_position_embeddings=max_pos)


def rope_frequencies(dim, base=10000.0, scaling=None, seq_len=None):
    config = config_for(dim, base, scaling)
    rule = config.rope_parameters["rope_type"]
    if rule == "default":  # (not in ROPE_INIT_FUNCTIONS: each model's own; Phi's reads partial_rotary_factor)
        inv, factor = PhiRotaryEmbedding.compute_default_rope_parameters(config)
        return inv, float(factor)
    inv, factor = ROPE_INIT_FUNCTIONS[rule](config, None, seq_len=seq_len)
    return inv, float(factor)
