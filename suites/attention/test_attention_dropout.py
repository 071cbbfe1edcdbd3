"""Attention dropout (``dropout_p > 0``): statistical and structural properties.

Dropout acts on the attention *weights*: ``softmax(QK^T * scale) ∘ D / (1 - p)`` with D a
Bernoulli(1 - p) keep mask, fresh for every call, batch item, head and query row, drawn from
torch's RNG (reproducible under ``torch.manual_seed``), or, as the named convention
``dropout_rng = generator``, from the ``generator=`` the caller passes.

The probe reads the mask out exactly. With Q = K = 0 every weight is 1/S; with values
``V = S * [I_S | 1]`` (Ev = S + 1) the output row of query i is

    out[i, j] = D[i, j] / (1 - p)        for j < S    (the mask, already rescaled)
    out[i, S] = sum_j D[i, j] / (1 - p)                (the row's kept weights, summed)

so a kept weight is 1/(1-p) exactly, a dropped one 0, and the last column must equal the row's
sum. Dropout applied to the output or to the values breaks that identity (and values dropout
gives every query row the same pattern); no rescale gives 1 instead of 1/(1-p); an ignored
``dropout_p`` keeps every weight. A target that does not support dropout declares
``HARNESS_UNSUPPORTED = {"dropout"}`` and these properties are reported unsupported.

False-failure bounds (a correct kernel with independent Bernoulli(1 - p) keeps), each at most
DELTA = 1e-6 per run of the property (union bound over its examples, whatever the profile):
  keep_rate   Hoeffding: P(|rate - (1 - p)| >= t) <= 2 exp(-2 N t^2); t is set from the N
              weights of the call so that this is ALPHA = DELTA / KEEP_RATE_EXAMPLES, and the
              property draws at most KEEP_RATE_EXAMPLES examples (``@settings``, also under
              harness-thorough): <= 1e-6 per run.
  fresh_masks two independent masks of n >= 256 weights agree everywhere with probability
              (p^2 + (1-p)^2)^n <= 0.68^256 < 1e-40 (p in [0.2, 0.7]); each comparison is of
              at least that many weights, 4 per example: < 1e-36 per run at 1000s of examples.
  seeded      two independent masks of n >= 256 weights agree with probability < 1e-40 (as
              above): a mask that is not reproducible is never mistaken for one that is.
  the others  are exact identities of the probe (no statistics): only the tolerance policy.
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings

from harness.spec import tolerance
from harness.suites.attention.configs import DropoutConfig, dropout_configs
from harness.suites.kit import KNOWN, ImplementationError, check_convention, on_target, record_label, run
from harness.boundary.target_ops import seeded
from harness.suites.attention.helpers import SDPA, call_sdpa

PROPERTY_PREFIX = "attention"
pytestmark = [pytest.mark.needs(SDPA), pytest.mark.uses("dropout")]
#: the false-failure budget of one run of a statistical property (all its examples together)
DELTA = 1e-6
#: the keep-rate property's examples per run, fixed whatever the profile: its bound is per run
KEEP_RATE_EXAMPLES = 30
#: the keep-rate test's false-failure probability per example
ALPHA = DELTA / KEEP_RATE_EXAMPLES


def probe(cfg: DropoutConfig, device):
    """Q = K = 0, V = S * [I | 1]: the output is the rescaled keep mask and its row sums."""
    dt = cfg.torch_dtype
    q = torch.zeros(*cfg.batch, cfg.hq, cfg.L, cfg.E, dtype=dt, device=device)
    k = torch.zeros(*cfg.batch, cfg.hkv, cfg.S, cfg.E, dtype=dt, device=device)
    eye = torch.cat([torch.eye(cfg.S), torch.ones(cfg.S, 1)], dim=-1) * cfg.S
    v = eye.to(dt).to(device).expand(*cfg.batch, cfg.hkv, cfg.S, cfg.S + 1).contiguous()
    return q, k, v


def keep_mask(out: torch.Tensor, cfg: DropoutConfig) -> torch.Tensor:
    """Bool (*batch, Hq, L, S): which weights the call kept (kept = 1/(1-p), dropped = 0)."""
    return out[..., :cfg.S].double().cpu().nan_to_num(0.0) > 0.5


def dropped_call(target, cfg):
    q, k, v = probe(cfg, target.device)
    return call_sdpa(target, cfg, q, k, v, dropout_p=cfg.dropout_p)


def check_dropout_keep_rate(target, cfg):
    """With dropout_p = p the fraction of attention weights kept is 1 - p (a Hoeffding bound at ALPHA = 1e-6 /
    30 per example: false failure < 1e-6 per run). With N >= 1024 weights the radius is <= 0.094: p ignored
    (rate 1) or a rate off by 0.1 fails."""
    mask = keep_mask(dropped_call(target, cfg), cfg)
    n = mask.numel()
    rate = float(mask.double().mean())
    t = math.sqrt(math.log(2 / ALPHA) / (2 * n))
    if abs(rate - (1 - cfg.dropout_p)) > t:
        raise AssertionError(f"dropout_p={cfg.dropout_p}: {rate:.4f} of {n} attention weights were kept, "
                             f"expected {1 - cfg.dropout_p:.4f} +- {t:.4f} (a correct kernel is this far off "
                             f"with probability < {ALPHA:g})" + (" -- dropout_p is ignored" if rate == 1.0 else ""))


def check_dropout_scaling(target, cfg):
    """Kept weights are rescaled by 1/(1-p), so the expected output equals the output without
    dropout; dropped weights are exactly 0."""
    out = dropped_call(target, cfg)
    got = out[..., :cfg.S]
    mask = keep_mask(out, cfg)
    p = cfg.dropout_p
    ref = mask.double() / (1 - p)
    dt = cfg.torch_dtype
    naive = (mask.to(dt) * (torch.tensor(1.0 / cfg.S, dtype=dt) * cfg.S)) / torch.tensor(1 - p, dtype=dt)
    tolerance.assert_close(got, ref, naive, dtype=dt,
                           what=f"probe with dropout_p={p} (kept weights must be 1/(1-p) = {1 / (1 - p):.4g} "
                                f"times their value, dropped ones 0)")


def check_dropout_on_weights(target, cfg):
    """Dropout acts on the attention weights, not on the values or the output: the probe's last
    value column (all ones) must read back the sum of the same row's kept weights."""
    out = dropped_call(target, cfg)
    rows = out[..., :cfg.S].double().cpu().sum(dim=-1)
    last = out[..., cfg.S]
    naive = out[..., :cfg.S].sum(dim=-1)  # the same sum in the output's dtype: the yardstick
    try:
        tolerance.assert_close(last, rows, naive, dtype=cfg.torch_dtype, what="the all-ones value column")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; with dropout on the weights it equals the sum of the row's kept "
                             f"weights -- dropout acts on the output or on the values instead") from None


def _distinct(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    if torch.equal(a, b):
        raise AssertionError(f"{what} have the same dropout mask ({a.numel()} weights): the mask is not "
                             f"drawn afresh")


def check_dropout_fresh_masks(target, cfg):
    """Masks differ across calls, batch items, heads and query rows (bound < 1e-40, in the module doc)."""
    first, second = (keep_mask(dropped_call(target, cfg), cfg) for _ in range(2))
    _distinct(first, second, "two calls")
    flat = first.reshape(-1, cfg.hq, cfg.L, cfg.S)
    if flat.shape[0] > 1:
        _distinct(flat[0], flat[1], "batch items 0 and 1")
    if cfg.hq > 1:
        _distinct(flat[:, 0], flat[:, 1], "heads 0 and 1")
    rows = flat.transpose(-2, -1).reshape(-1, cfg.L)  # (batch*heads*S, L): row i's keep of key j
    if bool((rows == rows[:, :1]).all()):
        raise AssertionError("every query row has the same dropout mask: dropout acts on the values "
                             "(one mask per key), not on the attention weights")


def _reproducible(target, cfg, how: str, seed: int, seed_b: int | None = None):
    """Two calls' keep masks: ``global``: each after torch.manual_seed(seed) (``seed_b`` for the
    second); ``generator``: each with generator=torch.Generator().manual_seed(seed) (``seed_b``),
    after different global seeds. None when the target does not take ``generator=``."""
    q, k, v = probe(cfg, target.device)
    fn = target.lookup(SDPA)
    seeds = (seed, seed if seed_b is None else seed_b)
    try:
        if how == "global":
            outs = [on_target(target, seeded, s, fn, q, k, v, dropout_p=cfg.dropout_p) for s in seeds]
        else:
            outs = [on_target(target, seeded, g_seed, fn, q, k, v, dropout_p=cfg.dropout_p,
                              generator=torch.Generator(device=target.device).manual_seed(s))
                    for g_seed, s in zip((1, 2), seeds)]
    except ImplementationError as exc:
        if how == "generator" and "generator" in str(exc) and "TypeError" in str(exc):
            return None
        raise
    return [keep_mask(o, cfg) for o in outs]


def check_dropout_seeded(target, cfg):
    """Calls are reproducible: under torch.manual_seed (the protocol default, ``dropout_rng =
    global``) or, declared as ``dropout_rng = generator``, with a ``generator=`` seeded alike
    whatever the global RNG state. Which one holds is measured and named; another seed gives
    another mask."""
    seed = cfg.seed % 2**31
    declared = target.conventions.get("dropout_rng", KNOWN["dropout_rng"].default)
    measured = None
    for how in (declared, *(h for h in KNOWN["dropout_rng"].values if h != declared)):
        masks = _reproducible(target, cfg, how, seed)
        if masks is not None and torch.equal(*masks):
            measured = how
            break
    record_label(target, check_convention(
        "dropout_rng", measured, target.conventions,
        f"\n  two calls after torch.manual_seed({seed}) dropped different weights (and so did two calls with "
        f"generators seeded alike, where the kernel takes generator=): the kernel does not draw its mask from "
        f"torch's RNG, or not only from it"))
    a, c = _reproducible(target, cfg, measured, seed, seed + 1)
    _distinct(a, c, f"calls seeded {seed} and {seed + 1} ({measured} RNG)")


@settings(max_examples=KEEP_RATE_EXAMPLES)
@given(cfg=dropout_configs())
def test_dropout_keep_rate(target, cfg):
    run(target, check_dropout_keep_rate, cfg)


@given(cfg=dropout_configs())
def test_dropout_scaling(target, cfg):
    run(target, check_dropout_scaling, cfg)


@given(cfg=dropout_configs())
def test_dropout_on_weights(target, cfg):
    run(target, check_dropout_on_weights, cfg)


@given(cfg=dropout_configs())
def test_dropout_fresh_masks(target, cfg):
    run(target, check_dropout_fresh_masks, cfg)


@given(cfg=dropout_configs())
def test_dropout_seeded(target, cfg):
    run(target, check_dropout_seeded, cfg)
