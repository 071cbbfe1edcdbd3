"""Hugging Face transformers' ``LlamaRMSNorm`` as the protocol's ``RMSNorm``.

    x (*lead, *normalized_shape) -> weight * (x / sqrt(mean(x^2) + eps)), computed in float32

Conventions: a fixed default eps 1e-6 (``rmsnorm_eps: fixed``; torch uses finfo(dtype).eps) and
the plain ``x * weight`` scale. See ``harness.adapters.hf_norms`` for the constructor mapping.
"""
from __future__ import annotations

from transformers.models.llama.modeling_llama import LlamaRMSNorm

from harness.adapters.hf_norms import HARNESS_DTYPES, __version__, adapt  # noqa: F401

HARNESS_CONVENTIONS = {"rmsnorm_eps": "fixed", "rmsnorm_scale": "weight"}
RMSNorm = adapt(LlamaRMSNorm)
