"""Shared code for the Hugging Face RMSNorm adapters (one module per library class, since a
target exposes one ``RMSNorm``): ``hf_llama_rmsnorm``, ``hf_t5_layernorm``, ``hf_gemma_rmsnorm``.

The protocol constructs ``RMSNorm(normalized_shape, eps=None, elementwise_affine=True)`` like
torch.nn.RMSNorm; the HF classes take ``(hidden_size, eps=1e-6)`` and normalize over the last
dim. ``adapt`` maps one onto the other and changes nothing in the library's math:

- ``eps=None`` becomes the library's own default (1e-6: the ``rmsnorm_eps: fixed`` convention);
- a multi-dim ``normalized_shape`` is flattened into the last dim around the call (the mean
  square over the flattened dims is the mean square over the trailing dims), and ``.weight``
  is a (*normalized_shape) view of the library's weight, so writing it writes the library's;
- ``elementwise_affine=False``: the HF classes always have a weight; it stays at the library's
  identity init (ones; zeros for Gemma's 1 + weight), frozen, and ``.weight`` is None.

All three compute in float32 whatever the input dtype (a float64 input gets float32 accuracy),
so the adapters declare ``HARNESS_DTYPES`` without float64.
"""
from __future__ import annotations

import math

import torch
import transformers
from torch import nn

__version__ = transformers.__version__
HARNESS_DTYPES = ("float32", "float16", "bfloat16")


def adapt(library_cls: type, library_eps: float = 1e-6) -> type:
    """A protocol ``RMSNorm`` class around ``library_cls(hidden_size, eps)``."""

    class RMSNorm(nn.Module):
        def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
            super().__init__()
            shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
            self.normalized_shape = shape
            self.eps = library_eps if eps is None else eps
            self.elementwise_affine = elementwise_affine
            self.inner = library_cls(math.prod(shape), eps=self.eps)
            if not elementwise_affine:
                self.inner.weight.requires_grad_(False)

        @property
        def weight(self) -> torch.Tensor | None:
            return self.inner.weight.view(self.normalized_shape) if self.elementwise_affine else None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            k = len(self.normalized_shape)
            if tuple(x.shape[x.dim() - k:]) != self.normalized_shape:
                raise ValueError(f"input {tuple(x.shape)} does not end in normalized_shape {self.normalized_shape}")
            y = self.inner(x.reshape(*x.shape[:x.dim() - k], -1))
            return y.reshape(x.shape)

    RMSNorm.__qualname__ = RMSNorm.__name__ = "RMSNorm"
    RMSNorm.__doc__ = f"transformers' {library_cls.__name__} under the protocol's RMSNorm constructor."
    return RMSNorm
