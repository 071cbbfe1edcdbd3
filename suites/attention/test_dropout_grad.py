"""Attention dropout backward: the backward must use the forward's mask, rescaled.

    O = (P * M) V,  M = D / (1 - p)  (D the Bernoulli(1 - p) keep mask)        O (..., H, L, Ev)
    dV = (P * M)^T dO,  dP = (dO V^T) * M

The probe of ``suites/attention/test_attention_dropout.py`` reads the forward's mask out exactly: with
Q = K = 0 every weight is 1/S, and values V = S * [I_S | 1 | 0] (Ev = max(S + 1, L)) make the
output's first S columns the rescaled keep mask, out[i, j] = D[i, j] / (1 - p). One call under
``target_ops.manual_seed(seed)`` runs that forward and its backward with the identity upstream
dO = [I_L | 0] (..., H, L, Ev), so

    S * dV[j, i] = S * (P * M)[i, j] = D[i, j] / (1 - p)      for i < L, j < S

reads the weights the backward used, transposed, beside the forward's in the same call. A
backward that draws a fresh mask drops other weights; one that forgets 1/(1 - p) gives 1 where
the forward gave 1/(1 - p). Exact identities of the probe: no statistics (the comparison of the
values goes through the tolerance policy with ``K_GRAD``). A target that declares
``HARNESS_UNSUPPORTED`` ``dropout`` or ``backward`` is reported unsupported.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given

from harness.spec import tolerance
from harness.suites.attention.configs import DropoutConfig, dropout_configs
from harness.suites.kit import require_features, run
from harness.suites.attention.helpers import SDPA, features_of
from harness.suites.gradients import target_grads
from harness.suites.attention.test_attention_dropout import keep_mask, probe

PROPERTY_PREFIX = "attention_grad"
pytestmark = [pytest.mark.needs(SDPA), pytest.mark.uses("backward"), pytest.mark.uses("dropout")]


def probe_call(target, cfg: DropoutConfig):
    """(the forward's rescaled weights out[..., :S], the backward's S * dV^T) (*batch, H, L, S)
    of one seeded forward and backward of the probe with the identity upstream gradient."""
    q, k, v = probe(cfg, target.device)
    ev = max(cfg.S + 1, cfg.L)
    v = torch.nn.functional.pad(v, (0, ev - v.shape[-1]))  # S * [I | 1 | 0]
    g = torch.zeros(*cfg.batch, cfg.hq, cfg.L, ev, dtype=cfg.torch_dtype)
    g[..., :cfg.L] = torch.eye(cfg.L, dtype=cfg.torch_dtype)
    kw = {"dropout_p": cfg.dropout_p}
    require_features(target, *features_of(q, k, kw))
    out, (dv,), _ = target_grads(target, target.lookup(SDPA), (q, k, v), kw, (2,), g.to(target.device),
                                 seed=cfg.seed % 2**31)
    return out, (dv[..., :cfg.L].double().cpu() * cfg.S).transpose(-2, -1)


def check_dropout_mask(target, cfg):
    """The backward drops exactly the weights the forward dropped: it reuses the forward's keep mask (saved,
    or regenerated from the same RNG state), never a fresh one. One call under a seed with the dropout
    probe (Q = K = 0, V = S * [I | 1 | 0]) and the identity upstream dO = [I | 0], so S * dV^T reads the
    weights the backward used beside the forward's keep mask in the output (a fresh mask fails)."""
    out, back = probe_call(target, cfg)
    forward, backward = keep_mask(out, cfg), back.nan_to_num(0.0) > 0.5
    differ = forward != backward
    if bool(differ.any()):
        first = tuple(int(i) for i in differ.nonzero()[0])
        raise AssertionError(
            f"dropout_p={cfg.dropout_p}: the backward's dropout mask differs from the forward's at "
            f"{int(differ.sum())} of {differ.numel()} attention weights (first at {first}: the forward "
            f"{'kept' if forward[first] else 'dropped'} it, the backward {'kept' if backward[first] else 'dropped'} "
            f"it): the backward must use the forward's mask (saved, or regenerated from the same RNG state), "
            f"not draw a fresh one")


def check_dropout_scaling(target, cfg):
    """In that call the backward rescales the kept weights by 1/(1 - p) as the forward does, and its dropped
    ones are 0: S * dV^T equals the forward's rescaled keep mask D / (1 - p) under the tolerance policy (a
    backward without the rescale fails)."""
    out, back = probe_call(target, cfg)
    mask = keep_mask(out, cfg)
    p, dt = cfg.dropout_p, cfg.torch_dtype
    ref = mask.double() / (1 - p)
    inv_s = torch.tensor(1.0 / cfg.S, dtype=dt)
    naives = [(mask.to(dt) * inv_s / torch.tensor(1 - p, dtype=dt)).double() * cfg.S,
              (mask.to(dt) * (inv_s * torch.tensor(1 / (1 - p), dtype=dt))).double() * cfg.S]
    tolerance.assert_close(back, ref, tolerance.worst_naive(ref, naives), dtype=dt, k=tolerance.K_GRAD,
                           what=f"the weights the backward used, S * dV^T, with dropout_p={p} (kept weights "
                                f"must be rescaled by 1/(1-p) = {1 / (1 - p):.4g} as in the forward, dropped 0)")


@given(cfg=dropout_configs())
def test_dropout_mask(target, cfg):
    run(target, check_dropout_mask, cfg)


@given(cfg=dropout_configs())
def test_dropout_scaling(target, cfg):
    run(target, check_dropout_scaling, cfg)
