"""onnxruntime's CPU kernels of ``LayerNormalization`` (the ONNX standard's, opset 17) and
``SimplifiedLayerNormalization`` (onnxruntime's RMS norm, the node its transformer optimizer and
onnxruntime-genai emit for Llama-family models' RMSNorm), as the protocol's ``LayerNorm`` and ``RMSNorm``.

    --impl harness.adapters.ort_norms     (pip install onnxruntime==1.32.0)

Called as exported models call them: one node over the last axis (``axis=-1``, the default
``stash_type=1``: statistics in float32), run by an ``InferenceSession``
(``harness.adapters.ort_graph``). What is onnxruntime's: the statistics, eps inside the square
root, the scale (and bias). What the adapter does: the protocol's constructors
(``harness.adapters.last_dim_norm``; the module's parameters fed as the node's scale and bias in
the input's dtype, as a model of that dtype holds them; ``eps=None`` is 1e-5, the value the
exporters write: ``rmsnorm_eps: fixed``).

Declared: bfloat16 (NumPy has none), backward, autocast, and float64: ``epsilon`` is an attribute,
a 32-bit float in ONNX, so a float64 model's eps is rounded (the format's limit, as in
``harness.adapters.onnx_norms``). The fused ``SkipLayerNormalization`` / ``SkipSimplifiedLayerNormalization``
(the residual add, then the norm) are not a protocol name: their norm is this one.
"""
from __future__ import annotations

import onnxruntime as ort
import torch

from harness.adapters.last_dim_norm import op_norm_classes
from harness.adapters.ort_graph import ELEM, np_of, session, to_torch

__version__ = ort.__version__
HARNESS_DTYPES = ("float32", "float16")
HARNESS_UNSUPPORTED = {"backward", "autocast"}
HARNESS_CONVENTIONS = {"rmsnorm_eps": "fixed", "rmsnorm_scale": "weight"}


def _run(op: str, x: torch.Tensor, eps: float, *params: torch.Tensor) -> torch.Tensor:
    if x.dtype not in (torch.float32, torch.float16):
        raise NotImplementedError(f"{op} is not run with {x.dtype} here (HARNESS_DTYPES)")
    names = ("X", "Scale", "B")[:1 + len(params)]
    elem = ELEM[x.dtype]
    run = session(op, "", tuple((n, elem) for n in names), (("Y", elem),),
                  (("axis", -1), ("epsilon", float(eps))), 17)
    (y,) = run.run(None, {n: np_of(t.to(x.dtype)) for n, t in zip(names, (x, *params))})
    return to_torch(y, x)


LayerNorm, RMSNorm = op_norm_classes(_run, "LayerNormalization", "SimplifiedLayerNormalization", 1e-5)
