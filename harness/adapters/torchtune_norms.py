"""torchtune's norms as the protocol's ``LayerNorm`` and ``RMSNorm``: ``torchtune.modules.Fp32LayerNorm``
and ``torchtune.modules.RMSNorm``, as torchtune's model builders construct them.

    --impl harness.adapters.torchtune_norms     (pip install --no-deps torchtune==0.6.1)

- ``LayerNorm``: ``Fp32LayerNorm(normalized_shape, eps, elementwise_affine)``, an ``nn.LayerNorm`` that
  computes in float32 (input, weight and bias cast up) and casts the result to the input's dtype; it
  takes the protocol's constructor as it is.
- ``RMSNorm``: ``RMSNorm(dim, eps=1e-6)`` over the last dim, its weight named ``scale``, computed by
  ``F.rms_norm`` on the float32 input with the (float32) scale, cast back. The protocol's constructor
  is mapped by ``harness.adapters.last_dim_norm`` (``eps=None`` is torchtune's 1e-6: the
  ``rmsnorm_eps: fixed`` convention; no affine: the scale frozen at ones).

Both compute in float32 whatever the input's dtype, so a float64 input gets float32 accuracy:
float64 is not declared. The files are read as ``harness.adapters.torchtune_files`` says (torchtune
0.6's package imports torchao).
"""
from __future__ import annotations

from importlib import metadata

from harness.adapters.last_dim_norm import rms_norm_class
from harness.adapters.torchtune_files import load

_RMSNorm, _ = load("modules.rms_norm", "RMSNorm", __name__)
_Fp32LayerNorm, _ = load("modules.layer_norm", "Fp32LayerNorm", __name__)
__version__ = metadata.version("torchtune")

HARNESS_CONVENTIONS = {"rmsnorm_eps": "fixed", "rmsnorm_scale": "weight"}
HARNESS_DTYPES = ("float32", "float16", "bfloat16")


class LayerNorm(_Fp32LayerNorm):
    """torchtune's ``Fp32LayerNorm`` as it is (it takes ``nn.LayerNorm``'s constructor, the protocol's); a
    subclass defined here, so the target provides the name whether torchtune's package imports or not."""


RMSNorm = rms_norm_class(lambda n, eps: _RMSNorm(n, eps=eps), 1e-6,
                         "torchtune's ``RMSNorm(dim, eps)`` under the protocol's RMSNorm constructor.", weight="scale")
