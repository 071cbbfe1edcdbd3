"""Hugging Face transformers' ``T5LayerNorm`` (an RMS norm: no mean subtraction, no bias) as the
protocol's ``RMSNorm``.

    x (*lead, *normalized_shape) -> weight * (x / sqrt(mean(x^2) + eps)), mean square in float32

Conventions: a fixed default eps 1e-6 (``rmsnorm_eps: fixed``) and the plain ``x * weight``
scale. See ``harness.adapters.hf_norms`` for the constructor mapping.
"""
from __future__ import annotations

from transformers.models.t5.modeling_t5 import T5LayerNorm

from harness.adapters.hf_norms import HARNESS_DTYPES, __version__, adapt  # noqa: F401

HARNESS_CONVENTIONS = {"rmsnorm_eps": "fixed", "rmsnorm_scale": "weight"}
RMSNorm = adapt(T5LayerNorm)
