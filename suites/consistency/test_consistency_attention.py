"""Consistency of the attention names: the session's targets held to each other on the same inputs
(``scaled_dot_product_attention``, ``sliding_window_attention``, ``attention_varlen``, and
``attention_varlen`` against every target's SDPA run per sequence; ``suites/consistency/varlen.py``).
How the targets are called and compared: ``suites/consistency/differential.py``.

    shape notation: q (B, Hq, L, E), k (B, Hkv, S, E), v (B, Hkv, S, Ev)
"""
from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from harness.reference.sliding_window import sliding_window_math
from harness.suites.attention.configs import attn_configs, window_configs
from harness.suites.attention.helpers import naive as attention_naive
from harness.suites.attention.helpers import truth as attention_truth
from harness.suites.consistency import varlen
from harness.suites.consistency.differential import (Case, as_float64, assert_consistent, not_compared, outputs_agree, policy,
                                               sharing)

#: the plug-in reads it: these tests hold targets to each other (the consistency section),
#: they are not properties of one target
CONSISTENCY = True
#: the family of protocol names this module compares (``harness/protocol.py``)
NAMES_OF = "attention"


def _sdpa_calls(cfg, device):
    q, k, v = cfg.qkv(device)
    return [("plain", (q, k, v), {}), ("is_causal=True", (q, k, v), {"is_causal": True})]


def _sdpa_judge(cfg, label, args, kwargs, out_dtype):
    q, k, v = args  # the attention suites' yardstick: the worst of the three scale placements
    return as_float64, policy(attention_truth(q, k, v, **kwargs), attention_naive(q, k, v, **kwargs), q.dtype)


def _window_calls(cfg, device):
    q, k, v = cfg.qkv(device)
    return [("default scale", (q, k, v, cfg.window), {})]


def _window_judge(cfg, label, args, kwargs, out_dtype):
    q, k, v = (t.cpu() for t in args[:3])
    truth = sliding_window_math(q, k, v, cfg.window)
    return as_float64, policy(truth, sliding_window_math(q, k, v, cfg.window, compute_dtype=q.dtype), q.dtype)


#: one differential check per record with ``compared`` (harness/protocol.py says how, in words)
CASES: dict[str, Case] = {
    "scaled_dot_product_attention": Case(attn_configs(), _sdpa_calls, _sdpa_judge),
    "sliding_window_attention": Case(window_configs(), _window_calls, _window_judge),
    "attention_varlen": Case(varlen.CONFIGS, varlen.calls, varlen.judge),
}
#: the family's names with no differential check, and why (each record's ``not_compared``)
NOT_COMPARED = not_compared(NAMES_OF)


@pytest.mark.parametrize("name", [*CASES, *NOT_COMPARED])
@given(data=st.data())
def test_outputs_agree(loaded_targets, name, data):
    """The targets that define ``name`` give the same outputs on the same inputs."""
    outputs_agree(loaded_targets, name, data, CASES, NOT_COMPARED)


@pytest.mark.parametrize("name", [varlen.VS_DENSE])
@given(data=st.data())
def test_varlen_against_dense(loaded_targets, name, data):
    """Every target's ``attention_varlen`` and every target's SDPA run per sequence agree on the
    same packed inputs (``suites/consistency/varlen.py``)."""
    if len(loaded_targets) < 2:
        pytest.skip("a differential check needs two or more loaded --impl targets")
    packed, dense = sharing(loaded_targets, "attention_varlen"), sharing(loaded_targets, varlen.SDPA)
    if not packed or not dense:
        pytest.skip("needs a target with attention_varlen and one with scaled_dot_product_attention")
    cfg = data.draw(varlen.CONFIGS, label="cfg")
    packed, dense = [t for t in packed if t.supports(cfg)], [t for t in dense if t.supports(cfg)]
    calls = varlen.calls(cfg, (packed or dense)[0].device)
    results = varlen.packed_and_dense(packed, dense, cfg, *calls[0][1:])
    roles = {r.name for r, _ in results}
    assume("attention_varlen" in roles and len(roles) == 2)  # (one role's targets alone: the check above)
    assert_consistent(name, cfg, Case(None, varlen.calls, varlen.judge), calls, results)
