"""Shared code for the Hugging Face RMSNorm adapters (one module per library class, since a
target exposes one ``RMSNorm``): ``hf_llama_rmsnorm``, ``hf_t5_layernorm``, ``hf_gemma_rmsnorm``.

The protocol constructs ``RMSNorm(normalized_shape, eps=None, elementwise_affine=True)`` like
torch.nn.RMSNorm; the HF classes take ``(hidden_size, eps=1e-6)`` and normalize over the last
dim. ``adapt`` maps one onto the other (``harness.adapters.last_dim_norm``) and changes nothing in the
library's math; ``eps=None`` becomes the library's own default (1e-6: the ``rmsnorm_eps: fixed``
convention); without ``elementwise_affine`` the weight stays at the library's identity init (ones;
zeros for Gemma's 1 + weight), frozen.

All three compute in float32 whatever the input dtype (a float64 input gets float32 accuracy),
so the adapters declare ``HARNESS_DTYPES`` without float64.
"""
from __future__ import annotations

import transformers

from harness.adapters.last_dim_norm import LastDimNorm, features

__version__ = transformers.__version__
HARNESS_DTYPES = ("float32", "float16", "bfloat16")


def adapt(library_cls: type, library_eps: float = 1e-6) -> type:
    """A protocol ``RMSNorm`` class around ``library_cls(hidden_size, eps)`` (``LastDimNorm``)."""

    class RMSNorm(LastDimNorm):
        def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
            eps = library_eps if eps is None else eps
            super().__init__(library_cls(features(normalized_shape), eps=eps), normalized_shape, eps=eps,
                             elementwise_affine=elementwise_affine, bias=None)

    RMSNorm.__qualname__ = RMSNorm.__name__ = "RMSNorm"
    RMSNorm.__doc__ = f"transformers' {library_cls.__name__} under the protocol's RMSNorm constructor."
    return RMSNorm
