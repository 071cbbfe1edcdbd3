"""Hugging Face transformers' ``GemmaRMSNorm`` as the protocol's ``RMSNorm``.

    x (*lead, *normalized_shape) -> (x / sqrt(mean(x^2) + eps)) * (1 + weight), in float32

Conventions: the ``(1 + weight)`` scale with the weight initialized to zeros
(``rmsnorm_scale: one_plus_weight``) and a fixed default eps 1e-6 (``rmsnorm_eps: fixed``).
See ``harness.adapters.hf_norms`` for the constructor mapping.
"""
from __future__ import annotations

from transformers.models.gemma.modeling_gemma import GemmaRMSNorm

from harness.adapters.hf_norms import HARNESS_DTYPES, __version__, adapt  # noqa: F401

HARNESS_CONVENTIONS = {"rmsnorm_eps": "fixed", "rmsnorm_scale": "one_plus_weight"}
RMSNorm = adapt(GemmaRMSNorm)
