"""BERT masked-language-model masking (the seeds: 15 %, 80/10/10; RoBERTa's dynamic masking).

    inputs, labels = mask_tokens(input_ids, vocab_size=V, mask_token_id=m,
                                 special_tokens_mask=special, mlm_probability=p, generator=g)

Of the non-special tokens, a fraction p is selected; a selected token becomes
[MASK] (80 %), a random id in [0, V) (10 %) or stays (10 %); labels hold the
original id at selected positions and -100 elsewhere. Selection is measured from
the labels (labels != -100). Independent per-token selection is the
``mlm_selection: independent`` convention (transformers' collator); exactly
round(n p) per sequence (Google's create_pretraining_data.py) is ``fixed_count``.

Statistical properties: every bound below is a false-failure probability of at
most DELTA = 1e-6 for the whole test (union bound over its Hypothesis examples,
fixed by ``@settings(max_examples=...)`` whatever the profile, and its rates),
valid for any seed; CI's seeds are drawn by the derandomized profile. MLM batches
are built on the CPU (masking is data-pipeline work).
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.suites.bert.configs import DELTA, MLMConfig, hoeffding_radius, mlm_configs
from harness.suites.strategies import NO_SHRINK
from harness.suites.kit import ImplementationError, check_convention, impl, manual_seed, record_label, run

PROPERTY_PREFIX = "mlm"
MASK = "mask_tokens"
IGNORE = -100
pytestmark = pytest.mark.needs(MASK)
#: Hypothesis examples of each statistical test (large samples per example instead)
STAT_EXAMPLES = 3
SPLIT = {"mask": 0.8, "random": 0.1, "unchanged": 0.1}


def call_mask(target, cfg: MLMConfig, ids, special, generator=None, **overrides):
    """The target's (inputs, labels) as CPU int64, after checking their kind and shape."""
    kw = {**cfg.kwargs(), **overrides}
    out = impl(target, MASK)(ids, special_tokens_mask=special, generator=generator, **kw)
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise ImplementationError(f"{MASK} returned {type(out).__name__}; the protocol returns (inputs, labels)")
    result = []
    for name, t in zip(("inputs", "labels"), out):
        if not isinstance(t, torch.Tensor) or t.dtype.is_floating_point or t.dtype == torch.bool:
            raise ImplementationError(f"{MASK} returned {name} of type "
                                      f"{getattr(t, 'dtype', type(t).__name__)}, expected an integer tensor")
        if tuple(t.shape) != tuple(ids.shape):
            raise ImplementationError(f"{MASK} returned {name} of shape {tuple(t.shape)}, expected {tuple(ids.shape)}")
        result.append(t.detach().cpu().long())
    return tuple(result)


def _pct(x: float) -> str:
    return f"{100 * x:.2f} %"


def check_selection_rate(target, cfg):
    """A fraction mlm_probability (default 0.15) of the non-special tokens is selected (Hoeffding bound, false
    failure <= 1e-6).

    Bound: Hoeffding over the n ~ 0.87-0.91 M non-special tokens (i.i.d. selection),
    delta = 1e-6 / 3 examples: radius sqrt(ln(2 / delta) / 2n) <= 0.30 points, so a rate off
    by 0.6 points or more (e.g. 13 % instead of 15 %) fails with probability >= 1 - 1e-6. A
    target declaring ``mlm_selection: fixed_count`` gets the deterministic rounding slack
    0.5 / (shortest row) instead.
    """
    ids, special = cfg.batch()
    _, labels = call_mask(target, cfg, ids, special, cfg.generator(1))
    words = ~special
    n = int(words.sum())
    rate = float(((labels != IGNORE) & words).sum()) / n
    if target.conventions.get("mlm_selection") == "fixed_count":
        radius, how = 0.5 / int(words.sum(1).min()), "the rounding of a per-sequence count"
    else:
        radius, how = hoeffding_radius(n, DELTA / STAT_EXAMPLES), "Hoeffding, delta = 3.3e-7"
    if abs(rate - cfg.p) > radius:
        raise AssertionError(
            f"selected {_pct(rate)} of the {n:,} non-special tokens; mlm_probability = {cfg.p}"
            f"{' (the default)' if cfg.mlm_probability is None else ''}: a correct implementation is within "
            f"+-{100 * radius:.3f} points ({how})")


def check_replacement_split(target, cfg):
    """Of the selected tokens 80 % become [MASK], 10 % a random id in [0, vocab_size), 10 % stay (conditional
    rates).

    A random draw can equal the original (it then counts as unchanged) or [MASK]: that shifts
    each rate by at most b = 0.2 / (vocab_size - 8) <= 2.1e-4. Bound: conditionally on the
    selection, the categories are i.i.d.; Hoeffding for each of the 3 rates over the
    n_sel >= ~125 k selected tokens (mlm_probability >= 0.15), delta = 1e-6 / (3 examples x 3
    rates): radius <= 0.83 points (b included), so a split off by 2 points in any rate
    (78/12/10, 70/20/10, 80/0/20) fails with probability >= 1 - 1e-6.
    """
    ids, special = cfg.batch()
    inputs, labels = call_mask(target, cfg, ids, special, cfg.generator(2))
    out_of_vocab = (inputs < 0) | (inputs >= cfg.vocab_size)
    if out_of_vocab.any():
        bad = inputs[out_of_vocab]
        raise AssertionError(f"{int(out_of_vocab.sum())} input ids lie outside the vocabulary [0, {cfg.vocab_size}) "
                             f"(e.g. {bad[:5].tolist()}): random replacements must be drawn from [0, vocab_size)")
    sel = (labels != IGNORE) & ~special
    n = int(sel.sum())
    if n == 0:
        raise AssertionError(f"no token was selected among {int((~special).sum()):,} non-special tokens")
    is_mask = sel & (inputs == cfg.mask_token_id)
    unchanged = sel & (inputs == ids) & ~is_mask
    rates = {"mask": int(is_mask.sum()) / n, "unchanged": int(unchanged.sum()) / n}
    rates["random"] = 1.0 - rates["mask"] - rates["unchanged"]
    radius = hoeffding_radius(n, DELTA / (STAT_EXAMPLES * 3)) + 0.2 / (cfg.vocab_size - 8)
    off = {k: rates[k] - SPLIT[k] for k in SPLIT if abs(rates[k] - SPLIT[k]) > radius}
    if off:
        shown = "/".join(f"{100 * rates[k]:.2f}" for k in ("mask", "random", "unchanged"))
        raise AssertionError(
            f"the {n:,} selected tokens split {shown} % into [MASK]/random/unchanged, expected 80/10/10 "
            f"(+-{100 * radius:.3f} points per rate; off: "
            f"{', '.join(f'{k} by {100 * v:+.2f}' for k, v in off.items())})")


def check_special_tokens(target, cfg):
    """Positions marked in special_tokens_mask are never selected: label -100 and input unchanged
    (deterministic; 64 x 128 tokens with about 1400 special positions)."""
    ids, special = cfg.batch()
    inputs, labels = call_mask(target, cfg, ids, special, cfg.generator(3))
    hit = special & ((labels != IGNORE) | (inputs != ids))
    if hit.any():
        where = [tuple(i) for i in hit.nonzero()[:3].tolist()]
        raise AssertionError(f"{int(hit.sum())} of the {int(special.sum())} special positions were selected "
                             f"(label != -100 or input changed), e.g. at {where}: original ids "
                             f"{[int(ids[w]) for w in where]}, inputs {[int(inputs[w]) for w in where]}, "
                             f"labels {[int(labels[w]) for w in where]}")


def check_labels(target, cfg):
    """labels = the original id where selected and -100 elsewhere; every changed input is labelled.

    Deterministic, plus one event of negligible probability for a correct implementation: that
    all ~6800 non-special tokens are selected (<= 0.5^6000) -- which labelling every token is.
    """
    ids, special = cfg.batch()
    inputs, labels = call_mask(target, cfg, ids, special, cfg.generator(4))
    labelled = labels != IGNORE
    wrong = labelled & (labels != ids)
    if wrong.any():
        where = tuple(wrong.nonzero()[0].tolist())
        raise AssertionError(f"{int(wrong.sum())} labels are neither -100 nor the original id: at {where} the "
                             f"label is {int(labels[where])}, the original {int(ids[where])} (the ignore index "
                             f"of torch's cross-entropy is -100)")
    silent = (inputs != ids) & ~labelled
    if silent.any():
        where = tuple(silent.nonzero()[0].tolist())
        raise AssertionError(f"{int(silent.sum())} inputs were changed but carry no label (-100), e.g. at {where}: "
                             f"{int(ids[where])} -> {int(inputs[where])}")
    words = ~special
    if bool(labelled[words].all()):
        raise AssertionError(f"every one of the {int(words.sum()):,} non-special tokens has a label: labels must be "
                             f"-100 off the selected {_pct(cfg.p)}")


def check_generator(target, cfg):
    """The generator decides everything: the same seed gives the same (inputs, labels) whatever
    the global RNG state; another seed gives another mask. (Two independent selections of
    n ~ 6800 tokens coincide with probability (1 - 2p(1-p))^n < 1e-200.)"""
    ids, special = cfg.batch()
    seed = cfg.seed % 2**31
    with torch.random.fork_rng(devices=[]):
        manual_seed(1)
        a = call_mask(target, cfg, ids, special, torch.Generator().manual_seed(seed))
        manual_seed(2)
        b = call_mask(target, cfg, ids, special, torch.Generator().manual_seed(seed))
        c = call_mask(target, cfg, ids, special, torch.Generator().manual_seed(seed + 1))
    if not (torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])):
        raise AssertionError("two calls with generators seeded alike returned different masks when the global RNG "
                             "state differed: the masking does not draw from the generator it is given")
    if torch.equal(a[1], c[1]):
        raise AssertionError(f"generators seeded {seed} and {seed + 1} gave the same mask: the generator is ignored")


def check_dynamic_masking(target, cfg):
    """RoBERTa's dynamic masking: masking the same batch again (same generator object, or the
    global RNG) gives a new mask. (Coincidence probability < 1e-200, as for the generator.)"""
    ids, special = cfg.batch()
    g = cfg.generator(5)
    first = call_mask(target, cfg, ids, special, g)[1]
    again = call_mask(target, cfg, ids, special, g)[1]
    if torch.equal(first, again):
        raise AssertionError("masking the same batch twice with one generator gave the same mask (static masking, "
                             "as BERT's preprocessing): each call must draw a new mask")
    with torch.random.fork_rng(devices=[]):
        manual_seed(cfg.seed % 2**31)
        first = call_mask(target, cfg, ids, special, None)[1]
        again = call_mask(target, cfg, ids, special, None)[1]
    if torch.equal(first, again):
        raise AssertionError("masking the same batch twice with generator=None gave the same mask (static masking)")


def _band_probability(n: int, p: float) -> tuple[float, int, int]:
    """P(|Binomial(n, p) - np| <= sd) and the band [lo, hi]."""
    mean, sd = n * p, math.sqrt(n * p * (1 - p))
    lo, hi = math.ceil(mean - sd), math.floor(mean + sd)
    return sum(math.comb(n, k) * p ** k * (1 - p) ** (n - k) for k in range(lo, hi + 1)), lo, hi


def check_independence(target, cfg):
    """Tokens are selected independently (``mlm_selection: independent``, tested by the binomial dispersion)
    or, when declared, a fixed count per sequence (``fixed_count``); the measured scheme is named.

    16384 rows of 64 words between [CLS] and [SEP]: a fixed count shows as every row having
    the same count (independent: probability < 0.3^16383); 32 batches of 2 x 16 words: a
    per-batch count as equal totals (< 0.25^31). Independent selection must also give
    (a) the binomial dispersion: the fraction of rows whose count lies within one standard
    deviation of 64 p equals its exact binomial probability q, and (b) no clustering: disjoint
    adjacent pairs are both selected at rate p^2. Hoeffding for (a) over 16384 rows and (b)
    over 524288 pairs, delta = 1e-6 / (3 examples x 4 events): radii 0.023 and 0.0040.
    """
    g = cfg.generator(6)
    n, rows = 64, 16384
    ids = torch.randint(4, cfg.vocab_size, (rows, n + 2), generator=g)
    ids[ids == cfg.mask_token_id] = 4 if cfg.mask_token_id != 4 else 5
    ids[:, 0], ids[:, -1] = 1, 2
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    sel = (call_mask(target, cfg, ids, special, cfg.generator(7))[1] != IGNORE)[:, 1:-1]
    counts = sel.sum(1)
    small_ids, small_special = ids[:2, :18].clone(), special[:2, :18].clone()
    small_ids[:, -1], small_special[:, -1] = 2, True
    g_small = cfg.generator(9)
    totals = [int((call_mask(target, cfg, small_ids, small_special, g_small)[1] != IGNORE).sum()) for _ in range(32)]
    delta = DELTA / (3 * 4)
    q, lo, hi = _band_probability(n, cfg.p)
    band = float(((counts >= lo) & (counts <= hi)).double().mean())
    r_band = hoeffding_radius(rows, delta)
    pairs = sel[:, 0::2] & sel[:, 1::2]
    pair_rate, r_pair = float(pairs.double().mean()), hoeffding_radius(pairs.numel(), delta)
    evidence = ""
    if bool((sel == sel[0]).all()) and rows > 1:
        measured, evidence = None, " Every row selected the same positions."
    elif bool((counts == counts[0]).all()):
        measured = "fixed_count"
        evidence = f" Every one of {rows} rows of {n} words had exactly {int(counts[0])} selected."
    elif len(set(totals)) == 1:
        measured, evidence = "fixed_count", f" Every one of 32 batches of 32 words had exactly {totals[0]} selected."
    elif abs(band - q) > r_band:
        measured = None
        evidence = (f" The row counts are not binomial: {_pct(band)} of rows have a count in [{lo}, {hi}], "
                    f"independent selection gives {_pct(q)} +- {100 * r_band:.2f} points "
                    f"({'under' if band > q else 'over'}-dispersed).")
    elif abs(pair_rate - cfg.p ** 2) > r_pair:
        measured = None
        evidence = (f" Adjacent tokens are selected together at rate {pair_rate:.4f}, independent selection gives "
                    f"p^2 = {cfg.p ** 2:.4f} +- {r_pair:.4f} (span or whole-word masking?).")
    else:
        measured = "independent"
    record_label(target, check_convention("mlm_selection", measured, target.conventions, evidence))


@settings(max_examples=STAT_EXAMPLES, phases=NO_SHRINK)
@given(cfg=mlm_configs("large"))
def test_selection_rate(target, cfg):
    run(target, check_selection_rate, cfg)


@settings(max_examples=STAT_EXAMPLES, phases=NO_SHRINK)
@given(cfg=mlm_configs("large", rates=(None, 0.15, 0.3, 0.5)))
def test_replacement_split(target, cfg):
    run(target, check_replacement_split, cfg)


@settings(phases=NO_SHRINK)
@given(cfg=mlm_configs("medium", extra_special=st.just(0.05)))
def test_special_tokens(target, cfg):
    run(target, check_special_tokens, cfg)


@settings(phases=NO_SHRINK)
@given(cfg=mlm_configs("medium"))
def test_labels(target, cfg):
    run(target, check_labels, cfg)


@settings(max_examples=10, phases=NO_SHRINK)
@given(cfg=mlm_configs("medium"))
def test_generator(target, cfg):
    run(target, check_generator, cfg)


@settings(max_examples=10, phases=NO_SHRINK)
@given(cfg=mlm_configs("medium"))
def test_dynamic_masking(target, cfg):
    run(target, check_dynamic_masking, cfg)


@settings(max_examples=3, phases=NO_SHRINK)
@given(cfg=mlm_configs("medium", extra_special=st.just(0.0)))
def test_independence(target, cfg):
    run(target, check_independence, cfg)
