"""The ONNX standard's ``LayerNormalization`` (opset 17) and ``RMSNormalization`` (opset 23) operators as
their reference evaluator computes them (``onnx.reference.ReferenceEvaluator``, NumPy), as the
protocol's ``LayerNorm`` and ``RMSNorm``.

    --impl harness.adapters.onnx_norms     (pip install onnx==1.23.2)

Called as their users call them: one node in a model, run by ``ReferenceEvaluator`` on NumPy arrays,
over the last axis (``axis=-1``) with the spec's default ``stash_type=1``: "the floating-point
precision used in stage one of the computation", float32, which the spec's own function body
follows (it casts X to ``stash_type`` before the statistics). What is ONNX's: the statistics, eps
inside the square root, the scale (and bias) applied after. What the adapter does: the protocol's
constructors (``harness.adapters.last_dim_norm``; the module's parameters are fed as the node's
``Scale`` and ``B`` in the input's dtype, as a model of that dtype holds them; ``eps=None`` is
RMSNormalization's default epsilon 1e-5: ``rmsnorm_eps: fixed``).

Declared: NumPy here has no bfloat16, no gradients and no autocast (``HARNESS_DTYPES``,
``backward``, ``autocast``); and no float64: ``epsilon`` is an attribute, and ONNX attributes are
32-bit floats, so a float64 model's eps is rounded to float32 (1e-3 becomes 1.0000000475e-3, which
``layernorm.eps_inside_sqrt`` and ``rmsnorm.eps`` see in float64). That is the format's, not the
evaluator's; unlike ``onnx_attention``'s scale it cannot be folded into an input.

Found (docs/found.md): in float16 both operators compute their statistics in float16, although the
spec's ``stash_type=1`` (and its function body) says float32; x^2 overflows from |x| = 256 and
RMSNormalization returns 0 there (``rmsnorm.large_values``, ``layernorm.large_values``). This module
is therefore a known-buggy release (``harness.controls.KNOWN_BUGGY``), not a control.
"""
from __future__ import annotations

import functools

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from harness.adapters.last_dim_norm import op_norm_classes

__version__ = onnx.__version__
HARNESS_DTYPES = ("float32", "float16")
HARNESS_UNSUPPORTED = {"backward", "autocast"}
HARNESS_CONVENTIONS = {"rmsnorm_eps": "fixed", "rmsnorm_scale": "weight"}

_ELEM = {torch.float32: TensorProto.FLOAT, torch.float16: TensorProto.FLOAT16}
_OPSET = {"LayerNormalization": 17, "RMSNormalization": 23}


@functools.lru_cache(maxsize=16)
def _evaluator(op: str, dtype: torch.dtype, eps: float, bias: bool) -> ReferenceEvaluator:
    """One ``op`` node over X, Scale (and B) along the last axis, the default stash_type."""
    names = ["X", "Scale", "B"] if bias else ["X", "Scale"]
    inputs = [helper.make_tensor_value_info(n, _ELEM[dtype], None) for n in names]
    node = helper.make_node(op, names, ["Y"], axis=-1, epsilon=float(eps))
    graph = helper.make_graph([node], op, inputs, [helper.make_tensor_value_info("Y", _ELEM[dtype], None)])
    return ReferenceEvaluator(helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET[op])]))


def _run(op: str, x: torch.Tensor, eps: float, *params: torch.Tensor) -> torch.Tensor:
    if x.dtype not in _ELEM:
        raise NotImplementedError(f"ONNX's reference evaluator is not called with {x.dtype} here (HARNESS_DTYPES)")
    feeds = {n: p.detach().to(x.dtype).cpu().numpy() for n, p in zip(("X", "Scale", "B"), (x, *params))}
    (y,) = _evaluator(op, x.dtype, float(eps), len(params) == 2).run(None, feeds)
    return torch.from_numpy(np.ascontiguousarray(y)).to(x.device)


LayerNorm, RMSNorm = op_norm_classes(_run, "LayerNormalization", "RMSNormalization", 1e-5)
