"""The normalization names in the suites that run across names: ``residual_block``'s history
(``history.residual_block``, judged by ``norm_placement.placement``) and the differential checks of
``LayerNorm`` and ``RMSNorm`` (the session's targets held to each other: each built on every target with
the same weight and bias and called on one x; ``suites/consistency/differential.py``).

    x (..., *normalized_shape)
"""
from __future__ import annotations

from typing import Callable

from harness.reference.layernorm import layer_norm_math
from harness.reference.rmsnorm import rms_norm_math
from harness.suites.consistency.differential import Case, as_float64, policy
from harness.suites.histories import History
from harness.suites.norms import helpers as norms
from harness.suites.norms import test_norm_placement as norm_placement
from harness.suites.norms.configs import norm_configs, wide_dtypes

HISTORIES = (
    History(name="residual_block", configs=norm_configs(dtypes=wide_dtypes(), max_ns_dims=1, min_features=2),
            judge=norm_placement.check_placement, keep=("normalized_shape", "dtype")),
)

_NORM_EPS = {"LayerNorm": 1e-5, "RMSNorm": 1e-6}


def _norm_calls(cfg, device):
    weight, bias = cfg.params()
    return [("affine, eps given", (cfg.x(device),), {"weight": weight, "bias": bias})]


def _norm_case(name: str, math: Callable) -> Case:
    """``name(shape, eps)`` built on every target with the same weight (and bias), called on one x."""
    def invoke(target, _, cfg, args, kwargs):
        params = kwargs if name == "LayerNorm" else {"weight": kwargs["weight"]}
        mod = norms.build(target, name, cfg, _NORM_EPS[name], **params)
        return norms.forward(target, mod, name, args[0])

    def judge(cfg, label, args, kwargs, out_dtype):
        x, eps = args[0], _NORM_EPS[name]
        kw = dict(normalized_shape=cfg.normalized_shape, weight=kwargs["weight"], eps=eps,
                  **({"bias": kwargs["bias"]} if name == "LayerNorm" else {}))
        return as_float64, policy(norms.truth(math, x, **kw), norms.naive(math, x, **kw), x.dtype)

    return Case(norm_configs(), _norm_calls, judge, invoke=invoke)


#: one differential check per record with ``compared`` (harness/spec/protocol.py says how, in words)
CASES: dict[str, Case] = {
    "LayerNorm": _norm_case("LayerNorm", layer_norm_math),
    "RMSNorm": _norm_case("RMSNorm", rms_norm_math),
}

