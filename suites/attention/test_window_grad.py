"""Sliding-window attention backward: dQ, dK, dV of ``sliding_window_attention``.

    query (B, H, L, E), key (B, H, S, E), value (B, H, S, Ev), L <= S  ->  O (B, H, L, Ev)

The window is the forward's, measured by the sliding-window suite's one-hot probe
(``suites.attention.test_sliding_window.measure_extent``: ``w`` or ``w+1`` keys, queries aligned to the
end of the keys); the backward must follow it. Each property runs the target's forward and
backward in its worker with a random upstream gradient dO and compares dq (B, H, L, E),
dk (B, H, S, E) and dv (B, H, S, Ev) with float64 autograd of the reference math under the
measured window mask (``K_GRAD`` x the naive same-dtype autograd error + floor). The structural
property is exact: keys that only queries with zero upstream gradient see get dK = dV = 0 bit
for bit, even when they hold +-1e4.
"""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from hypothesis import given

from harness.suites import regimes
from harness.suites.attention.configs import window_configs
from harness.suites.regimes import covering
from harness.suites.kit import run
from harness.suites.gradients import assert_zero, poison_for_backward, qkv_and_upstream, target_grads
from harness.suites.attention.test_attention_grad import agree
from harness.suites.attention.test_sliding_window import SWA, measure_extent

PROPERTY_PREFIX = "window_grad"
pytestmark = [pytest.mark.needs(SWA), pytest.mark.uses("backward")]


def window_grads(target, q, k, v, window, g, *, scale=None) -> list[torch.Tensor]:
    """[dq, dk, dv] of the target's sliding_window_attention(q, k, v, window, scale) for dO = g."""
    kw = {} if scale is None else {"scale": scale}
    _, grads, _ = target_grads(target, target.lookup(SWA), (q, k, v, window), kw, (0, 1, 2), g)
    return grads


def measured_window(target, cfg) -> tuple[str, torch.Tensor]:
    """(the forward's extent, its (L, S) visibility): the mask the backward must use."""
    extent, vis = measure_extent(target, cfg)
    if extent is None:
        raise AssertionError(f"the forward's window (window={cfg.window}) matches neither w nor w+1 keys, "
                             f"so its backward has no reference (see sliding_window.window_extent)")
    return extent, vis.reshape(-1, cfg.L, cfg.S)[0].cpu()


def check_agreement(target, cfg):
    """``sliding_window_attention``'s dq, dk, dv with the default scale equal float64 autograd of attention
    under the forward's window mask (its extent, w or w+1, measured by the one-hot probe; the reference's
    ``sliding_window_math`` with that extent)."""
    extent, vis = measured_window(target, cfg)
    q, k, v, g = qkv_and_upstream(target, cfg)
    agree(window_grads(target, q, k, v, cfg.window, g), q, k, v, g,
          f"(window={cfg.window}, extent {extent})", attn_mask=vis.to(q.device))


def check_outside_window(target, cfg):
    """Keys before a cut hold +-1e4 and the upstream gradient is 0 on every query that sees one:
    those keys get exactly zero dk and dv (a backward window one key wider than the forward's
    leaks into the key just before the first window with gradient); with scale=0.5 every gradient
    matches autograd. The window is kept below S so that some query does not see the first key."""
    if cfg.S > 1 and cfg.window >= cfg.S:
        cfg = replace(cfg, window=cfg.S - 1)
    extent, vis = measured_window(target, cfg)
    q, k, v, g = qkv_and_upstream(target, cfg)
    starts = vis.float().argmax(-1)  # the first key each query sees (L,)
    rows = (starts >= 1).nonzero().flatten()
    scale = 0.5
    if len(rows):
        gen = cfg.generator(salt=3)
        r = int(rows[int(torch.randint(len(rows), (1,), generator=gen))])
        past = torch.arange(cfg.S) < int(starts[r])  # keys before query r's window
        live = ~(vis & past).any(-1)  # queries that see no key before the cut
        g = g * live.to(g.dtype).to(g.device)[:, None]
        k2, v2 = poison_for_backward(q, k, v, past.to(q.device), gen, g, scale=scale)
        dq, dk, dv = window_grads(target, q, k2, v2, cfg.window, g, scale=scale)
        what = (f"keys before {int(starts[r])} (at +-1e4) are seen only by queries with zero upstream "
                f"gradient (window={cfg.window}, extent {extent}; queries {r}.. have one)")
        assert_zero(dk, past, -2, f"dk of {what}")
        assert_zero(dv, past, -2, f"dv of {what}")
    else:  # every query sees the first key: nothing lies outside
        dq, dk, dv = window_grads(target, q, k, v, cfg.window, g, scale=scale)
    agree([dq, dk, dv], q, k, v, g, f"with scale=0.5 (window={cfg.window}, extent {extent})",
          attn_mask=vis.to(q.device), scale=scale)


@given(cfg=window_configs())
@covering(regimes.GRAD_WINDOW)
def test_agreement(target, cfg):
    run(target, check_agreement, cfg)


@given(cfg=window_configs())
@covering(regimes.GRAD_WINDOW)
def test_outside_window(target, cfg):
    run(target, check_outside_window, cfg)
