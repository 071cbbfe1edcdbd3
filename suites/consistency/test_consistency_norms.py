"""Consistency of the normalization names: the session's targets held to each other on the same
inputs (``LayerNorm`` and ``RMSNorm``, each built on every target with the same weight and bias and
called on one x). How the targets are called and compared: ``suites/consistency/differential.py``.

    x (..., *normalized_shape)
"""
from __future__ import annotations

from typing import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.reference.layernorm import layer_norm_math
from harness.reference.rmsnorm import rms_norm_math
from harness.suites.consistency.differential import Case, as_float64, not_compared, outputs_agree, policy
from harness.suites.norms import helpers as norms
from harness.suites.norms.configs import norm_configs

#: the plug-in reads it: these tests hold targets to each other (the consistency section),
#: they are not properties of one target
CONSISTENCY = True
#: the family of protocol names this module compares (``harness/protocol.py``)
NAMES_OF = "norms"

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


#: one differential check per record with ``compared`` (harness/protocol.py says how, in words)
CASES: dict[str, Case] = {
    "LayerNorm": _norm_case("LayerNorm", layer_norm_math),
    "RMSNorm": _norm_case("RMSNorm", rms_norm_math),
}
#: the family's names with no differential check, and why (each record's ``not_compared``)
NOT_COMPARED = not_compared(NAMES_OF)


@pytest.mark.parametrize("name", [*CASES, *NOT_COMPARED])
@given(data=st.data())
def test_outputs_agree(loaded_targets, name, data):
    """The targets that define ``name`` give the same outputs on the same inputs."""
    outputs_agree(loaded_targets, name, data, CASES, NOT_COMPARED)
